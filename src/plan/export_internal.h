/*
 * What the plan export's formats share (plan/export*.c only): the plan with its layout and
 * figures resolved once, the header every output opens with, each engine's command line and
 * the gateway's, so that a port, a flag or a GPU list is written by one function whichever
 * format carries it.
 */
#ifndef PLAN_EXPORT_INTERNAL_H
#define PLAN_EXPORT_INTERNAL_H

#include <stdbool.h>

#include "plan/export.h"
#include "spec/preset.h"
#include "util/strbuf.h"

/* One export being written. */
struct export_ctx {
    enum plan_export_format format;
    const struct plan_result *plan;
    const struct libra_config *cfg;
    const struct spec_model *model;
    int argc; /* the command's words after "libra" (plan_export_input) */
    char *const *argv;
    char *command; /* "libra plan ...", its words shell-quoted, valid UTF-8 (a byte that is not
                      becomes '?'); owned */
    struct plan_export_layout layout;
    double mem_fraction; /* the engines' share of HBM */
    char digest[17];     /* the config digest, hex */
};

/* The inference engine a launch line starts. */
enum export_engine { EXPORT_ENGINE_SGLANG, EXPORT_ENGINE_VLLM };

#define EXPORT_ARGV_MAX 16

/* An engine's command line: literal words, the first n_program of them the program (the rest
 * its flags), one of them (model_word) the model, which a shell script takes from a variable
 * instead. */
struct export_argv {
    int n;
    int n_program;
    int model_word;
    char word[EXPORT_ARGV_MAX][SPEC_NAME_MAX + 16];
};

/* Fills a with the command starting engine e for group g: the engine's own flags for its TP
 * size, port, bind address (0.0.0.0) and memory fraction. */
void export_engine_argv(const struct export_ctx *x, enum export_engine e,
                        const struct plan_export_group *g, struct export_argv *a);

/* Appends the header: '#' comment lines naming the libra version, the format, the config
 * digest, the command and the plan in one line each. */
void export_header(struct strbuf *b, const struct export_ctx *x);

/* Appends g's GPU indices as "0,1,2,3". */
void export_gpu_list(struct strbuf *b, const struct plan_export_group *g);

/* Appends the plan's fleet as "10xTP2 + 1xTP4". */
void export_fleet(struct strbuf *b, const struct plan_result *r);

/* Appends s as one shell word: as is when it needs no quoting, else single-quoted. */
void export_sh_word(struct strbuf *b, const char *s);

/*
 * Appends libra serve's arguments after "serve": --listen listen (written as is), the
 * cluster's hardware, model and GPUs, the plan's buckets without their instance counts
 * (sched.buckets: the registered engines are the instances) and one
 * --engine URL,tp=N per engine in instance order, separated by sep. url writes engine g's URL
 * (a shell expression or a literal); shell says whether the words are a script's (quoted), or
 * a comment's (quoted too, with the bytes a comment cannot hold replaced).
 */
void export_serve_args(struct strbuf *b, const struct export_ctx *x, const char *listen,
                       const char *sep, bool shell,
                       void (*url)(struct strbuf *b, const struct plan_export_group *g));

/* The formats (export_shell.c, export_cluster.c, export_trainer.c). Each appends the whole
 * output to b; slurm, verl and megatron, which can refuse (a pool no launcher can place
 * as planned), return LIBRA_EINVAL with err set; ray returns
 * LIBRA_EINTERNAL with err set (and appends nothing) when a member could not be packed. */
void export_engines_sh(const struct export_ctx *x, enum export_engine e, struct strbuf *b);
int export_slurm(const struct export_ctx *x, struct strbuf *b, struct libra_error *err);
int export_ray(const struct export_ctx *x, struct strbuf *b, struct libra_error *err);
void export_k8s(const struct export_ctx *x, struct strbuf *b);
int export_verl(const struct export_ctx *x, struct strbuf *b, struct libra_error *err);
int export_megatron(const struct export_ctx *x, struct strbuf *b, struct libra_error *err);

#endif
