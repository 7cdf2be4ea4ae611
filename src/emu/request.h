/*
 * The generation requests `libra emu` answers, parsed from the engines' request bodies into
 * one form: SGLang's /generate, vLLM's /v1/completions, /v1/chat/completions and
 * /inference/v1/generate, each with libra's optional request object (docs/emu.md "The libra
 * request object"): {"libra": {"trajectory", "prompt", "sample", "events", "emu":
 * {"gen_tokens": N}}}. Only what the emulator uses is kept; the rest is checked for type.
 *
 * Text (a prompt string, chat messages) has no tokenizer here: it becomes one token per four
 * bytes, four lowercase letters that spell an id in base 26 (as emu_text writes generated
 * tokens) that id, other bytes a hash of them. Equal text prefixes give equal token prefixes,
 * and an answer's text reads back as its ids, so the prefix cache sees an append-only
 * conversation as one. Chat lines are padded to whole tokens, so an answer sent back in a
 * message starts a token.
 *
 * Pure: memory in, memory out (tests/fuzz/fuzz_emu_request.c).
 */
#ifndef EMU_REQUEST_H
#define EMU_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum emu_api {
    EMU_SGLANG_GENERATE,  /* POST /generate */
    EMU_VLLM_COMPLETIONS, /* POST /v1/completions */
    EMU_VLLM_CHAT,        /* POST /v1/chat/completions */
    EMU_VLLM_GENERATE     /* POST /inference/v1/generate */
};

struct emu_gen_request {
    enum emu_api api;
    uint32_t *ids;          /* the prompt's token ids (owned) */
    size_t n_ids;           /* >= 1 */
    int64_t max_new_tokens; /* the request's cap on generated tokens; -1: the engine's default */
    int64_t gen_tokens;     /* libra.emu.gen_tokens: tokens the turn generates; -1: absent */
    char *rid;              /* the client's request id (SGLang rid, vLLM request_id); owned,
                             * NULL when absent */
    bool stream;            /* answer as Server-Sent Events */
    bool usage;             /* vLLM: stream_options.include_usage, a last chunk with the usage */
    bool logprobs;          /* return a log-probability per generated token */
    bool token_ids;         /* vLLM: return the prompt's and the output's token ids */
    char model[128];        /* vLLM: the "model" member ("" when absent) */
};

/*
 * Parses len bytes of body for api into *out. vocab bounds the token ids (ids must be in
 * [0, vocab)). Returns 0, or -1 with a message naming the field in err (the caller answers
 * 400); *out is then empty (safe to free).
 */
int emu_request_parse(enum emu_api api, const char *body, size_t len, uint32_t vocab,
                      struct emu_gen_request *out, char *err, size_t err_size);

/*
 * Parses len bytes of body (jansson's decoding flags) as a JSON object. Returns it, or NULL
 * with err saying why, starting "body: ": empty, not an object, or not JSON, at the 1-based
 * line and column (in characters) where every file reader places it (ujson_error_at;
 * docs/emu.md "The endpoints").
 */
struct json_t *emu_body_parse(const char *body, size_t len, size_t flags, char *err, size_t size);

/* Frees what r owns; r may be zeroed. */
void emu_request_free(struct emu_gen_request *r);

/* The fake tokenizer: one id per four bytes of text, below vocab: the id four lowercase letters
 * spell (emu_text's inverse), else a hash of the bytes. Returns a malloc'd array of *n ids (at
 * least one: empty text is one token, though the parser refuses an empty prompt). */
uint32_t *emu_tokenize(const char *text, size_t len, uint32_t vocab, size_t *n);

#endif
