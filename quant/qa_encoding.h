/* SPDX-License-Identifier: MIT
 * The qa layout's constants, written once for C++ (quant/weight.h,
 * quant/qa_layout.h) and GLSL (shaders/qa_weights.glsl, which includes this
 * file): plain #defines only, no C++ and no GLSL. quant/qa_layout.h draws
 * the layout these numbers describe.
 */
#ifndef BASALT_QA_ENCODING_H
#define BASALT_QA_ENCODING_H

#define QA_BLOCK 32     /* weights per block (one scale each, or two halves of 16) */
#define QA_TILE_ROWS 16 /* rows interleaved in a tile: one 4-byte lane each */

/* Scale encodings (QaScales), kept as the source stores them. */
#define QA_SCALES_F16_SYM 0    /* per 32: f16 d; w = d * (q - 8), or d * q for signed 8 bits (Q4_0, Q8_0) */
#define QA_SCALES_F16_AFFINE 1 /* per 32: f16 d, f16 m; w = d * q + m (Q4_1) */
#define QA_SCALES_KQUANT 2     /* per 256: f16 d, dmin; per 32: u8 sc, m; w = d*sc*q - dmin*m (Q4_K, Q5_K) */
#define QA_SCALES_Q6K 3        /* per 256: f16 d; per 16: i8 sc; w = d*sc*(q - 32) (Q6_K) */
#define QA_SCALES_F16_ZERO 4   /* per 32: f16 d, f16 integer z; w = d * (q - z) (GPTQ asym) */

/* A group: [header][scales of G blocks][quants of G blocks]; bytes per 16-row tile. */
#define QA_F16_GROUP_BLOCKS 2    /* G of the f16 encodings */
#define QA_KQUANT_GROUP_BLOCKS 8 /* G of kquant and q6k: one K-quant super-block */
#define QA_KQUANT_HEADER_BYTES 64 /* kquant: d[16], dmin[16] f16; q6k: d[16] f16 and 32 unused */
#define QA_SCALE_BYTES_ONE_F16 32 /* f16_sym: d[16] */
#define QA_SCALE_BYTES_TWO_F16 64 /* f16_affine, f16_zero: d[16], m[16] or z[16] */
#define QA_SCALE_BYTES_KQUANT 32  /* kquant: sc[16], m[16] u8; q6k: sc_lo[16], sc_hi[16] i8 */
#define QA_QUANT_CHUNK_BYTES 64   /* a block's quants: chunks of 64 bytes, 4 per 4 bits + 1 per high bit; 8 for 8 bits */

#endif
