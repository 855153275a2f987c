// SPDX-License-Identifier: MIT
// The executor takes its backends from the registry (core/backend/registry.h):
// an offload backend registered there gets the nodes it supports, and when it
// fails mid-batch the executor drops it, places its nodes on the host and
// runs the batch again, giving the host's logits.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/backend/registry.h"
#include "core/engine/builtin_backends.h"
#include "core/error.h"
#include "core/model/model.h"
#include "core/runtime/executor.h"
#include "tests/unit/test_paths.h"

namespace basalt {
namespace {

// Runs the residual adds (as a GPU would, here by the host's arithmetic), and
// fails on its fail_at-th node: before it, it has written tensors the host
// never saw, as a lost device would have.
class FlakyBackend final : public Backend {
 public:
  explicit FlakyBackend(int fail_at) : fail_at_(fail_at) {}
  const char* name() const override { return "flaky"; }
  bool supports(const Node& n) const override { return n.op == Op::add; }
  void run(const Node& n, RunContext& ctx) override {
    if (failed_ || ++runs_ == fail_at_) {
      failed_ = true;
      throw BackendFailed("flaky backend lost (injected)");
    }
    const int64_t count = ctx.rows(n.out) * ctx.width(n.out);
    const float *a = ctx.buf(n.in[0]), *b = ctx.buf(n.in[1]);
    float* y = ctx.buf(n.out);
    for (int64_t i = 0; i < count; ++i) y[i] = a[i] + b[i];
  }
  bool healthy() const override { return !failed_; }

  static inline int made = 0;

 private:
  int fail_at_, runs_ = 0;
  bool failed_ = false;
};

class ExecutorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { path_ = test::make_tiny_model("executor"); }
  void TearDown() override {
    register_backend({"flaky", false, [](const BackendRequest&, std::string*) { return nullptr; }});
  }
  static std::vector<float> logits(const Model& m, Executor& ex) {
    Batch b;
    for (int32_t i = 0; i < 6; ++i) b.add(5 + i, i, 0, true);
    const float* l = ex.run(b);
    return std::vector<float>(l, l + 6 * m.spec().n_vocab);
  }
  static std::string path_;
};
std::string ExecutorTest::path_;

TEST_F(ExecutorTest, OffloadBackendComesFromTheRegistryAndFailsOverToTheHost) {
  auto m = Model::load(path_);
  KvCache kv_ref(m->spec(), 64, 1);
  Executor host_only(*m, kv_ref, 8);
  EXPECT_FALSE(host_only.offloading());
  const std::vector<float> want = logits(*m, host_only);

  for (int fail_at : {1, 3}) {  // the first add, and one in the second block
    SCOPED_TRACE("fails at add " + std::to_string(fail_at));
    FlakyBackend::made = 0;
    register_backend({"flaky", false, [fail_at](const BackendRequest& r, std::string* plan) -> std::unique_ptr<Backend> {
                        EXPECT_NE(r.host, nullptr) << "the host backend is made first";
                        ++FlakyBackend::made;
                        *plan = "flaky: the residual adds";
                        return std::make_unique<FlakyBackend>(fail_at);
                      }});
    KvCache kv(m->spec(), 64, 1);
    Executor ex(*m, kv, 8);
    EXPECT_EQ(FlakyBackend::made, 1);
    EXPECT_TRUE(ex.offloading());
    EXPECT_EQ(ex.offload_plan(), "flaky: the residual adds");
    EXPECT_EQ(logits(*m, ex), want) << "the batch run again on the host gives the host's logits";
    EXPECT_FALSE(ex.offloading()) << "the failed backend is dropped";
    EXPECT_EQ(logits(*m, ex), want);
  }
}

// A block copy reaches an offload backend at its next batch: until that has
// run, the source keeps the executor's reference (no one frees it and takes
// it for another block, whose writes the copy would then read). Host only:
// copied at once, nothing held.
TEST_F(ExecutorTest, CopySourceIsHeldUntilTheNextBatchRan) {
  auto m = Model::load(path_);
  for (bool offload : {false, true}) {
    SCOPED_TRACE(offload ? "offload" : "host only");
    register_backend({"flaky", false, [offload](const BackendRequest&, std::string* plan) -> std::unique_ptr<Backend> {
                        if (!offload) return nullptr;
                        *plan = "flaky: the residual adds";
                        return std::make_unique<FlakyBackend>(1 << 30);
                      }});
    KvCache kv(m->spec(), 4 * KvCache::kBlock, 2, 8, KvType::f16);
    Executor ex(*m, kv, 8);
    ASSERT_EQ(ex.offloading(), offload);
    ASSERT_TRUE(kv.grow(0));
    ASSERT_TRUE(kv.grow(1));
    const int32_t src = kv.table(0)[0];
    ex.copy_kv_block(src, kv.table(1)[0]);
    EXPECT_EQ(kv.refs(src), offload ? 2 : 1);
    kv.release(0);
    EXPECT_EQ(kv.refs(src), offload ? 1 : 0);
    Batch b;
    for (int32_t i = 0; i < 4; ++i) b.add(5 + i, i, 1, i == 3);
    ex.run(b);
    EXPECT_EQ(kv.refs(src), 0);
    EXPECT_EQ(kv.free_blocks(), 7);
  }
}

TEST_F(ExecutorTest, WithoutAHostBackendItSaysWhatToCall) {
  auto m = Model::load(path_);
  KvCache kv(m->spec(), 64, 1);
  register_backend({"cpu", false, [](const BackendRequest&, std::string*) { return nullptr; }});  // no host now
  try {
    Executor ex(*m, kv, 8);
    ADD_FAILURE() << "an executor without a host backend was made";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("register_builtin_backends()"), std::string::npos) << e.what();
  }
  register_builtin_backends();  // as the other tests expect it
  Executor ex(*m, kv, 8);
  EXPECT_FALSE(ex.offloading());
}

}  // namespace
}  // namespace basalt
