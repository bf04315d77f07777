// llama-mtmd-record MODEL MMPROJ RGB W H N_GEN PROMPT: what llama.cpp's multimodal library
// (tools/mtmd, b11434) makes of one image in a prompt, for the vision fixtures' references.
// RGB is the image as raw interleaved 8-bit RGB, W x H (decoded by the caller, so that both
// sides see the same pixels); PROMPT holds mtmd's marker (<__media__>) where the image goes.
// The prompt is tokenized and split as mtmd does it (mtmd_tokenize), every image chunk encoded
// (mtmd_encode_chunk: preprocessing, vision encoder, projector), then the chunks evaluated as
// llama.cpp's tools do (mtmd_helper_eval_chunks: the image rows unscaled, non-causal where the
// projector asks for it), then N_GEN greedy steps, each with its top 5 log-probs (a sorted
// softmax in f32, as llama-server's n_probs computes them).
// Prints JSON: {"chunks": [{"text": [ids]} | {"image": {"n_tokens": N, "embd": [...]}}],
//               "generate": [{"id": ID, "top": [[id, logprob] x 5]}]}.
// Built by scripts/bench-vs-llamacpp (scripts/llamacpp/targets.cmake); used by
// tests/fixtures/gemma3-vision/make_mmproj.py.
#include "llama.h"
#include "mtmd-helper.h"
#include "mtmd.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

static void print_top(llama_context * ctx, int n_vocab, int * best) {
    const float * logits = llama_get_logits_ith(ctx, -1);
    std::vector<std::pair<float, int>> cur(n_vocab);
    for (int t = 0; t < n_vocab; t++) {
        cur[t] = {logits[t], t};
    }
    std::sort(cur.begin(), cur.end(), [](const auto & a, const auto & b) { return a.first > b.first; });
    float cum = 0.0f;
    for (int i = 0; i < n_vocab; i++) {
        cum += expf(cur[i].first - cur[0].first);
    }
    *best = cur[0].second;
    printf("{\"id\":%d,\"top\":[", *best);
    for (int i = 0; i < 5 && i < n_vocab; i++) {
        printf("%s[%d,%.9g]", i ? "," : "", cur[i].second, logf(expf(cur[i].first - cur[0].first) / cum));
    }
    printf("]}");
}

int main(int argc, char ** argv) {
    if (argc != 8) {
        fprintf(stderr, "usage: %s MODEL MMPROJ RGB W H N_GEN PROMPT\n", argv[0]);
        return 2;
    }
    const int w = atoi(argv[4]);
    const int h = atoi(argv[5]);
    const int n_gen = atoi(argv[6]);
    std::vector<unsigned char> rgb((size_t) std::max(w, 0) * std::max(h, 0) * 3);
    FILE * f = fopen(argv[3], "rb");
    if (w <= 0 || h <= 0 || !f || fread(rgb.data(), 1, rgb.size(), f) != rgb.size()) {
        fprintf(stderr, "cannot read %d x %d RGB from %s\n", w, h, argv[3]);
        return 2;
    }
    fclose(f);
    llama_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
    mtmd_helper_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
    llama_backend_init();
    llama_model * model = llama_model_load_from_file(argv[1], llama_model_default_params());
    if (!model) {
        fprintf(stderr, "cannot load %s\n", argv[1]);
        return 1;
    }
    // the image's rows are one batch (the non-causal block needs n_ubatch >= its tokens)
    auto cp = llama_context_default_params();
    cp.n_ctx = 2048;
    cp.n_batch = 2048;
    cp.n_ubatch = 2048;
    cp.n_threads = 2;
    cp.n_threads_batch = 2;
    cp.n_seq_max = 1;
    llama_context * ctx = llama_init_from_model(model, cp);
    auto mp = mtmd_context_params_default();
    mp.use_gpu = false;
    mp.n_threads = 2;
    mp.print_timings = false;
    mp.warmup = false;
    mtmd_context * mctx = ctx ? mtmd_init_from_file(argv[2], model, mp) : nullptr;
    if (!mctx) {
        fprintf(stderr, "cannot load %s with %s\n", argv[2], argv[1]);
        return 1;
    }
    mtmd_bitmap * bitmap = mtmd_bitmap_init(w, h, rgb.data());
    mtmd_input_text text = {argv[7], strlen(argv[7]), /*add_special*/ true, /*parse_special*/ true};
    mtmd_input_chunks * chunks = mtmd_input_chunks_init();
    const mtmd_bitmap * bitmaps[] = {bitmap};
    if (mtmd_tokenize(mctx, chunks, &text, bitmaps, 1) != 0) {
        fprintf(stderr, "mtmd_tokenize failed\n");
        return 1;
    }
    const int n_embd = llama_model_n_embd_inp(model);
    printf("{\"chunks\":[");
    for (size_t i = 0; i < mtmd_input_chunks_size(chunks); i++) {
        const mtmd_input_chunk * c = mtmd_input_chunks_get(chunks, i);
        printf("%s", i ? "," : "");
        if (mtmd_input_chunk_get_type(c) == MTMD_INPUT_CHUNK_TYPE_TEXT) {
            size_t n = 0;
            const llama_token * ids = mtmd_input_chunk_get_tokens_text(c, &n);
            printf("{\"text\":[");
            for (size_t j = 0; j < n; j++) {
                printf("%s%d", j ? "," : "", ids[j]);
            }
            printf("]}");
        } else {
            if (mtmd_encode_chunk(mctx, c) != 0) {
                fprintf(stderr, "mtmd_encode_chunk failed\n");
                return 1;
            }
            const size_t n = mtmd_input_chunk_get_n_tokens(c);
            const float * embd = mtmd_get_output_embd(mctx);
            printf("{\"image\":{\"n_tokens\":%zu,\"embd\":[", n);
            for (size_t j = 0; j < n * (size_t) n_embd; j++) {
                printf("%s%.9g", j ? "," : "", embd[j]);
            }
            printf("]}}");
        }
    }
    printf("],\"generate\":[");
    llama_pos n_past = 0;
    if (mtmd_helper_eval_chunks(mctx, ctx, chunks, 0, 0, cp.n_batch, true, &n_past) != 0) {
        fprintf(stderr, "mtmd_helper_eval_chunks failed\n");
        return 1;
    }
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    for (int s = 0; s < n_gen; s++) {
        int best = 0;
        printf("%s", s ? "," : "");
        print_top(ctx, n_vocab, &best);
        if (s + 1 < n_gen && llama_decode(ctx, llama_batch_get_one(&best, 1))) {
            fprintf(stderr, "decode failed\n");
            return 1;
        }
    }
    printf("]}\n");
    mtmd_input_chunks_free(chunks);
    mtmd_bitmap_free(bitmap);
    mtmd_free(mctx);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
