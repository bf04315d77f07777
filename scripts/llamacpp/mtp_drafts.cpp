// llama-mtp-drafts TARGET ASSISTANT N_CTX N_PROMPT N_DRAFT ID...: llama.cpp's drafts by a Gemma 4
// MTP assistant ("gemma4-assistant"), made the way its speculative decoding makes them
// (common/speculative.cpp, common_speculative_impl_draft_mtp, b11434): the assistant's
// context shares the target's KV cache (ctx_other, LLAMA_CONTEXT_TYPE_MTP); each draft chain
// starts from the last sampled token at the position it will take and the target's
// post-final-norm hidden state of the position before (llama_get_embeddings_nextn_ith), and
// each next step feeds the drafted token, at the same position, with the hidden state the
// assistant returned (its nextn.post_projection).
//
// The target is teacher-forced: the prompt (the first N_PROMPT ids) in one batch, then one id
// per decode step. Before each forced id after the prompt, a chain of N_DRAFT greedy drafts
// (the top candidate, as the drafter takes it without sampling). Prints a JSON array, one
// object per position: {"pos", "last", "steps": [{"draft", "top": [[id, logprob] x5]}]},
// log-probabilities over the whole vocabulary (a softmax in double of the f32 logits).
// Built by scripts/llamacpp/build-tools; used by
// tests/fixtures/gemma4-assistant/make_assistant.py.
#include "llama.h"
#include "llama-ext.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <vector>

static void print_top(const float * logits, int n_vocab) {
    double mx = -INFINITY;
    for (int i = 0; i < n_vocab; i++) mx = std::max(mx, (double) logits[i]);
    double sum = 0;
    for (int i = 0; i < n_vocab; i++) sum += std::exp((double) logits[i] - mx);
    std::vector<int> order(n_vocab);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + 5, order.end(),
                      [&](int a, int b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
    printf("\"top\": [");
    for (int k = 0; k < 5; k++) {
        printf("%s[%d, %.6f]", k ? ", " : "", order[k], (double) logits[order[k]] - mx - std::log(sum));
    }
    printf("]");
}

int main(int argc, char ** argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: %s TARGET ASSISTANT N_CTX N_PROMPT N_DRAFT ID...\n", argv[0]);
        return 2;
    }
    const int n_ctx = atoi(argv[3]);
    const int n_prompt = atoi(argv[4]);
    const int n_draft = atoi(argv[5]);
    std::vector<llama_token> ids;
    for (int i = 6; i < argc; i++) ids.push_back(atoi(argv[i]));
    if (n_prompt <= 0 || (size_t) n_prompt >= ids.size() || (int) ids.size() > n_ctx || n_draft <= 0) {
        fprintf(stderr, "need 0 < N_PROMPT < number of ids <= N_CTX and N_DRAFT > 0\n");
        return 2;
    }
    llama_log_set([](ggml_log_level level, const char * text, void *) {
        if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
    }, nullptr);
    llama_backend_init();
    llama_model * target = llama_model_load_from_file(argv[1], llama_model_default_params());
    llama_model * assistant = llama_model_load_from_file(argv[2], llama_model_default_params());
    if (!target || !assistant) {
        fprintf(stderr, "cannot load the models\n");
        return 1;
    }
    // as llama-server runs: -t 2 -np 1, its default SWA cache
    auto cp = llama_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_ctx;
    cp.n_threads = 2;
    cp.n_threads_batch = 2;
    cp.n_seq_max = 1;
    cp.swa_full = false;
    llama_context * tgt = llama_init_from_model(target, cp);
    if (!tgt) {
        fprintf(stderr, "cannot make the target's context\n");
        return 1;
    }
    llama_set_embeddings_nextn(tgt, true, /*masked*/ false);
    auto dp = cp;
    dp.ctx_type = LLAMA_CONTEXT_TYPE_MTP;
    dp.ctx_other = tgt;
    llama_context * dft = llama_init_from_model(assistant, dp);
    if (!dft) {
        fprintf(stderr, "cannot make the assistant's context\n");
        return 1;
    }
    llama_set_embeddings_nextn(dft, true, /*masked*/ true);
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(assistant));
    const int n_embd = llama_model_n_embd_out(target);

    // the prompt; then the hidden state of its last position
    if (llama_decode(tgt, llama_batch_get_one(ids.data(), n_prompt)) != 0) {
        fprintf(stderr, "the target's prompt failed\n");
        return 1;
    }
    std::vector<float> h(llama_get_embeddings_nextn_ith(tgt, n_prompt - 1),
                         llama_get_embeddings_nextn_ith(tgt, n_prompt - 1) + n_embd);
    llama_batch_ext * batch = llama_batch_ext_init(dft);
    printf("[");
    for (int pos = n_prompt; pos < (int) ids.size(); pos++) {
        printf("%s\n{\"pos\": %d, \"last\": %d, \"steps\": [", pos > n_prompt ? "," : "", pos, ids[pos]);
        llama_token tok = ids[pos];
        std::vector<float> state = h;
        for (int s = 0; s < n_draft; s++) {
            llama_batch_ext_clear(batch);
            const int idx = llama_batch_ext_add_token(batch, 0, tok);
            const llama_pos p = pos;
            llama_batch_ext_set_pos(batch, idx, &p);
            llama_batch_ext_set_embd_token(batch, idx, llama_embd{state.data(), 1, (size_t) n_embd});
            llama_batch_ext_set_output_logits(batch, idx, true);
            if (llama_process(dft, LLAMA_PROCESS_TYPE_DECODE, batch) != 0) {
                fprintf(stderr, "the assistant's step failed at %d\n", pos);
                return 1;
            }
            const float * logits = llama_get_logits_ith(dft, idx);
            const llama_token draft = (llama_token) (std::max_element(logits, logits + n_vocab) - logits);
            printf("%s{\"draft\": %d, ", s ? ", " : "", draft);
            print_top(logits, n_vocab);
            printf("}");
            const float * next = llama_get_embeddings_nextn_ith(dft, idx);
            state.assign(next, next + n_embd);
            tok = draft;
        }
        printf("]}");
        // the target takes the forced id
        llama_token forced = ids[pos];
        if (llama_decode(tgt, llama_batch_get_one(&forced, 1)) != 0) {
            fprintf(stderr, "the target's step failed at %d\n", pos);
            return 1;
        }
        const float * hr = llama_get_embeddings_nextn_ith(tgt, 0);
        h.assign(hr, hr + n_embd);
    }
    printf("\n]\n");
    llama_batch_ext_free(batch);
    llama_free(dft);
    llama_free(tgt);
    llama_model_free(assistant);
    llama_model_free(target);
    return 0;
}
