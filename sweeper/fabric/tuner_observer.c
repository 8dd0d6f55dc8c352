/*
 * sweeper's observing tuner plugin for NCCL: it records the cost table NCCL hands a tuner for
 * each collective call (NCCL's predicted time, in microseconds, of every algorithm and protocol
 * it considers) and leaves the table and the channel count as NCCL made them, so NCCL chooses
 * as it would without a plugin. Written against the plugin ABI's own layout (tuner v3 and v4:
 * a name and three function pointers), so it builds with any C compiler and no NCCL headers.
 * The rank reads the records through the sweeper_observer_* functions (ctypes), never inside
 * a timed loop; a call costs NCCL one copy of its table into memory, no output (36 ns on the
 * CPU box: docs/measurements/cpu-observer-2026-12-02.md).
 */
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CELLS 64   /* numAlgo x numProto: 7 x 3 in NCCL 2.22-2.28 */
#define KEPT 64        /* the last calls kept per communicator */
#define MAX_COMMS 65536 /* communicators a process opens over its life (a scan's many) */

typedef int result_t;   /* ncclResult_t: ncclSuccess is 0 */
enum { SUCCESS = 0 };
typedef void (*logger_t)(int level, unsigned long flags, const char *file, int line,
                         const char *fmt, ...);

struct sweeper_call {
  uint64_t seq; /* 1 for a communicator's first call */
  int32_t func; /* ncclFunc_t: 0 Broadcast, 1 Reduce, 2 AllGather, 3 ReduceScatter, 4 AllReduce */
  int32_t num_pipe_ops;
  int32_t reg_buff; /* -1: tuner v3, which is not told */
  int32_t num_algo;
  int32_t num_proto;
  int32_t pad;
  uint64_t n_bytes;
  float cost[MAX_CELLS]; /* [algo][proto], as NCCL made it; -1: NCCL ignores the pair */
};

struct comm {
  int32_t id;
  uint64_t n_ranks, n_nodes;
  _Atomic uint64_t calls;
  struct sweeper_call kept[KEPT];
};

static struct comm *_Atomic comms[MAX_COMMS];
static _Atomic int32_t opened;

/* NCCL fails a communicator whose tuner's init fails: past MAX_COMMS, or without memory, the
 * communicator gets no context, and its calls are not recorded (the rows read none). */
static result_t init(size_t n_ranks, size_t n_nodes, logger_t log, void **context) {
  (void)log;
  *context = NULL;
  int32_t id = atomic_fetch_add(&opened, 1);
  if (id >= MAX_COMMS) return SUCCESS;
  struct comm *c = calloc(1, sizeof(struct comm));
  if (c == NULL) return SUCCESS;
  c->id = id;
  c->n_ranks = n_ranks;
  c->n_nodes = n_nodes;
  atomic_store(&comms[id], c);
  *context = c;
  return SUCCESS;
}

static void record(struct comm *c, int func, size_t n_bytes, int num_pipe_ops, float **table,
                   int num_algo, int num_proto, int reg_buff) {
  uint64_t seq = atomic_load(&c->calls) + 1; /* one thread enqueues a communicator's calls */
  struct sweeper_call *call = &c->kept[(seq - 1) % KEPT];
  int cells = num_algo * num_proto;
  if (cells > MAX_CELLS || cells < 0) cells = 0;
  call->seq = seq;
  call->func = func;
  call->num_pipe_ops = num_pipe_ops;
  call->reg_buff = reg_buff;
  call->num_algo = cells ? num_algo : 0;
  call->num_proto = cells ? num_proto : 0;
  call->n_bytes = n_bytes;
  /* NCCL hands float[numAlgo][numProto] cast to float**: its cells lie one after another */
  if (cells) memcpy(call->cost, (const float *)table, (size_t)cells * sizeof(float));
  atomic_store(&c->calls, seq);
}

static result_t coll_info_v4(void *context, int func, size_t n_bytes, int num_pipe_ops,
                             float **table, int num_algo, int num_proto, int reg_buff,
                             int *n_channels) {
  (void)n_channels; /* left as NCCL set it: NCCL's own count */
  if (context != NULL) record(context, func, n_bytes, num_pipe_ops, table, num_algo, num_proto,
                              reg_buff);
  return SUCCESS;
}

static result_t coll_info_v3(void *context, int func, size_t n_bytes, int num_pipe_ops,
                             float **table, int num_algo, int num_proto, int *n_channels) {
  return coll_info_v4(context, func, n_bytes, num_pipe_ops, table, num_algo, num_proto, -1,
                      n_channels);
}

static result_t destroy(void *context) {
  struct comm *c = context;
  if (c == NULL) return SUCCESS;
  atomic_store(&comms[c->id], NULL);
  free(c);
  return SUCCESS;
}

struct tuner_v4 {
  const char *name;
  result_t (*init)(size_t, size_t, logger_t, void **);
  result_t (*get_coll_info)(void *, int, size_t, int, float **, int, int, int, int *);
  result_t (*destroy)(void *);
};

struct tuner_v3 {
  const char *name;
  result_t (*init)(size_t, size_t, logger_t, void **);
  result_t (*get_coll_info)(void *, int, size_t, int, float **, int, int, int *);
  result_t (*destroy)(void *);
};

__attribute__((visibility("default"))) const struct tuner_v4 ncclTunerPlugin_v4 = {
    "sweeper-observer", init, coll_info_v4, destroy};
__attribute__((visibility("default"))) const struct tuner_v3 ncclTunerPlugin_v3 = {
    "sweeper-observer", init, coll_info_v3, destroy};

/* What the rank reads, outside its timed loops. */

__attribute__((visibility("default"))) int32_t sweeper_observer_opened(void) {
  return atomic_load(&opened);
}

__attribute__((visibility("default"))) uint64_t sweeper_observer_calls(int32_t comm) {
  if (comm < 0 || comm >= MAX_COMMS) return 0;
  struct comm *c = atomic_load(&comms[comm]);
  return c == NULL ? 0 : atomic_load(&c->calls);
}

/* The communicator's call `seq` into `out`: 0, or -1 where it is gone (closed, or older than
 * the KEPT calls kept). */
__attribute__((visibility("default"))) int32_t sweeper_observer_call(int32_t comm, uint64_t seq,
                                                                     struct sweeper_call *out) {
  if (comm < 0 || comm >= MAX_COMMS) return -1;
  struct comm *c = atomic_load(&comms[comm]);
  if (c == NULL || seq == 0 || seq > atomic_load(&c->calls)) return -1;
  struct sweeper_call *call = &c->kept[(seq - 1) % KEPT];
  if (call->seq != seq) return -1;
  *out = *call;
  return 0;
}

__attribute__((visibility("default"))) uint64_t sweeper_observer_ranks(int32_t comm) {
  if (comm < 0 || comm >= MAX_COMMS) return 0;
  struct comm *c = atomic_load(&comms[comm]);
  return c == NULL ? 0 : c->n_ranks;
}
