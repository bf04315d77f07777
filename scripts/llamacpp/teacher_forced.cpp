// llama-teacher-forced MODEL N_CTX N_PROMPT ID...: llama.cpp's log-probability of each forced
// token after the prompt, computed the way llama-server generates (tools/server,
// server-context.cpp, b11434): the prompt in the server's batches (for a sliding-window model
// the last 4 tokens and the 516 before them as batches of their own, where it checkpoints),
// then one decode step per token; the log-prob as the server's n_probs computes it (a sorted
// softmax in f32). Prints a JSON array with one log-prob per token after the prompt.
// Built by scripts/bench-vs-llamacpp (scripts/llamacpp/targets.cmake); used by
// scripts/agreement-table for llama.cpp's figure in the references' own schedule.
#include "llama.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

int main(int argc, char ** argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s MODEL N_CTX N_PROMPT ID...\n", argv[0]);
        return 2;
    }
    const int n_ctx = atoi(argv[2]);
    const int n_prompt = atoi(argv[3]);
    std::vector<llama_token> toks;
    for (int i = 4; i < argc; i++) {
        toks.push_back(atoi(argv[i]));
    }
    if (n_ctx <= 0 || n_prompt <= 0 || (size_t) n_prompt >= toks.size() || toks.size() > (size_t) n_ctx) {
        fprintf(stderr, "need 0 < N_PROMPT < number of ids <= N_CTX\n");
        return 2;
    }
    llama_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
    llama_backend_init();
    llama_model * model = llama_model_load_from_file(argv[1], llama_model_default_params());
    if (!model) {
        fprintf(stderr, "cannot load %s\n", argv[1]);
        return 1;
    }
    // as the references were recorded: llama-server -t 2 -np 1, its default SWA cache
    auto cp = llama_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = 2;
    cp.n_threads_batch = 2;
    cp.n_seq_max = 1;
    cp.swa_full = false;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "cannot make a context of %d\n", n_ctx);
        return 1;
    }
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    std::vector<int> ends;
    if (llama_model_n_swa(model) > 0) {
        for (int offset : {4 + 512, 4}) {
            if (n_prompt > offset) {
                ends.push_back(n_prompt - offset);
            }
        }
    }
    ends.push_back(n_prompt);
    int done = 0;
    for (int end : ends) {
        if (llama_decode(ctx, llama_batch_get_one(toks.data() + done, end - done))) {
            fprintf(stderr, "decode failed\n");
            return 1;
        }
        done = end;
    }
    std::vector<std::pair<float, int>> cur(n_vocab);
    std::vector<float> p(n_vocab);
    printf("[");
    for (size_t pos = n_prompt; pos < toks.size(); pos++) {
        const float * logits = llama_get_logits_ith(ctx, -1);
        for (int t = 0; t < n_vocab; t++) {
            cur[t] = {logits[t], t};
        }
        std::sort(cur.begin(), cur.end(), [](const auto & a, const auto & b) { return a.first > b.first; });
        float cum = 0.0f;
        for (int i = 0; i < n_vocab; i++) {
            p[i] = expf(cur[i].first - cur[0].first);
            cum += p[i];
        }
        float lp = -INFINITY;
        for (int i = 0; i < n_vocab; i++) {
            if (cur[i].second == toks[pos]) {
                lp = logf(p[i] / cum);
            }
        }
        printf("%s%.9g", pos == (size_t) n_prompt ? "" : ",", lp);
        if (pos + 1 < toks.size() && llama_decode(ctx, llama_batch_get_one(&toks[pos], 1))) {
            fprintf(stderr, "decode failed\n");
            return 1;
        }
    }
    printf("]\n");
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
