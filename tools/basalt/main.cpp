// SPDX-License-Identifier: MIT
// The basalt command: run, chat, info, bench, perplexity, quantize.
#include <cstdio>

#include "core/engine/builtin_backends.h"
#include "core/error.h"
#include "core/util/threads.h"
#include "tools/basalt/common.h"

int main(int argc, char** argv) {
  basalt::prefer_passive_openmp(argv);
  basalt::register_builtin_backends();
  CLI::App app{"basalt: fast LLM inference on the CPU"};
  app.require_subcommand(1);
  basalt::cli::register_run(app);
  basalt::cli::register_chat(app);
  basalt::cli::register_info(app);
  basalt::cli::register_bench(app);
  basalt::cli::register_perplexity(app);
  basalt::cli::register_quantize(app);
  basalt::cli::register_serve(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const basalt::Error& e) {
    std::fprintf(stderr, "basalt: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "basalt: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "basalt: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
