/* ampc's public C API, installed as <ampc/ampc.h> with the library libampc.a (build with
 * `pkg-config --cflags --libs ampc`, or CMake's find_package(ampc) and ampc::ampc): open an
 * ONNX model (optionally rewriting it in mixed precision in memory, AMP_AUTO=1), run it
 * with named inputs and outputs, run training steps that keep weights and optimizer state
 * resident, read, write, save and load that state bit-exactly, close. Every fallible call
 * returns an AmpCode and fills an AmpStatus with one line. */
#ifndef AMPC_H
#define AMPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ampc/status.h"  /* AmpCode, AmpStatus */
#include "ampc/version.h" /* AMPC_VERSION_* */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct AmpSession AmpSession; /* opaque */

#define AMP_TENSOR_MAX_RANK 8

/* A tensor passed in or out. dtype is ONNX's TensorProto.DataType number (1 float,
 * 6 int32, 7 int64, 9 bool, 10 float16, 16 bfloat16, ...); data holds the elements in
 * row-major order in ONNX's raw_data layout (little-endian, 16-bit floats as bits). */
typedef struct AmpTensorView {
    const char *name;
    int dtype;
    int rank;
    int64_t dims[AMP_TENSOR_MAX_RANK]; /* rank entries */
    void *data;
} AmpTensorView;

/* Bytes the elements take (0 for an unknown dtype). */
AMP_API size_t amp_tensor_view_bytes(const AmpTensorView *t);
/* Frees the data of a tensor the session returned (outputs, state copies). */
AMP_API void amp_tensor_view_free(AmpTensorView *t);

typedef enum AmpBackendKind {
    AMP_BACKEND_AUTO = 0, /* AMP_BACKEND's choice when set, else CUDA when built with it and a
                             device opens, else the CPU */
    AMP_BACKEND_CPU = 1,
    AMP_BACKEND_CUDA = 2, /* kernels/cuda; AMP_ERR_UNSUPPORTED without CUDA or a device */
    AMP_BACKEND_SIM = 3   /* the device simulator: the CPU kernels behind memory the runtime
                             cannot read, for tests (slower than the CPU; same results) */
} AmpBackendKind;

/* The library linked: AMPC_VERSION_STRING of the headers it was built with ("0.1.0"). */
AMP_API const char *amp_version(void);

/* Options structs (AmpSessionOptions, AmpExportOptions) grow by fields added at their end;
 * their first field, struct_size, tells the library which fields the caller knows:
 * initialise with AMP_SESSION_OPTIONS_INIT / AMP_EXPORT_OPTIONS_INIT (or
 * amp_session_options_init), which set it to the size of this header's struct, and set
 * fields by name. A program built against an older header then runs with a newer library
 * (the fields it lacks take their defaults), and one built against a newer header fails
 * with AMP_ERR_USAGE if it sets a field an older library lacks, rather than having it
 * ignored. struct_size 0 (a zeroed struct) reads as version 0.1's fields. Every field's
 * zero value is its default. */

/* The AMP settings are strings with the syntax of the environment variable named beside
 * each: a non-NULL field replaces that variable, NULL reads it once at open (unless
 * ignore_env). */
typedef struct AmpSessionOptions {
    size_t struct_size;     /* sizeof(AmpSessionOptions) as the caller compiled it (above) */
    AmpBackendKind backend; /* auto reads AMP_BACKEND (cpu, cuda, auto, sim) unless ignore_env */
    const char *amp_auto;   /* AMP_AUTO: "1" rewrites the model in mixed precision at open, "0" not */
    /* The AMP fields take what their variable and CLI option take, checked by one table
     * (passes/options.c); "" is the default (the variable is not read then). */
    /* AMP_PRECISION: "auto" (the default: the 16-bit type the session's device runs fastest:
     * fp16 on a GPU, bf16 on a CPU with bf16 dot products (AVX512-BF16, AMX-BF16), and on
     * a CPU without them none: the model stays float32, amp_session_stats says why),
     * "fp16" ("float16", "half") or "bf16" ("bfloat16") */
    const char *precision;
    const char *loss_scale; /* AMP_LOSS_SCALE: "dynamic", "none" or a positive number up to 3.4e38 */
    const char *opset_upgrade; /* AMP_OPSET_UPGRADE: "auto" (default: raise the ai.onnx opset when
                                  the 16-bit type needs a newer one), "never" or an opset N (7-22) */
    const char *log_path;   /* AMP_LOG_PATH: a folder for before.onnx, after.onnx and text dumps */
    const char *calibration; /* AMP_CALIBRATION: statistics of `ampc calibrate`; values whose measured
                                |x| passes 4096 keep their nodes float32 */
    /* AMP_ALLOWLIST_ADD, ..._REMOVE, and the same for INFERLIST, CLEARLIST, DENYLIST:
     * comma-separated op names ("MatMul,com.microsoft:FusedGemm"). */
    const char *allowlist_add, *allowlist_remove, *inferlist_add, *inferlist_remove;
    const char *clearlist_add, *clearlist_remove, *denylist_add, *denylist_remove;
    bool ignore_env;        /* read no environment variable: NULL fields take defaults */
    uint64_t seed;          /* random state of Dropout and friends (0: a fixed default) */
    bool no_plan;           /* no memory arena: every intermediate allocated alone */
    /* No fusion: on CUDA (and the simulator) the executor runs chains of elementwise nodes,
     * the loss-scaling check and the update gates as fused kernels (docs/internals.md,
     * "Fusion"), with results identical to the nodes they replace, and on the CPU float32
     * arithmetic chains and `ampc grad`'s convolution weight gradients as ConvGrad
     * (within float32 reassociation);
     * this runs every node as the model has it. A node hook (ampc calibrate, compare)
     * needs it. */
    bool no_fuse;
    /* Caps on work (0: none). A Loop or Scan node past max_iterations iterations in one
     * run, or a run or training step past timeout_seconds (checked between nodes and
     * between iterations: one long kernel is not cut short), stops with
     * AMP_ERR_UNSUPPORTED naming the cap; the session stays usable. */
    uint64_t max_iterations;
    double timeout_seconds;
    /* The largest tensor a run may hold, in bytes: an input given, or an intermediate or
     * output a node would make, past it fails the run with AMP_ERR_UNSUPPORTED naming the
     * cap and the size (0, or above 64 GiB: the executor's own 64 GiB cap). Initializers
     * are the model's and are not checked; nor is scratch a kernel keeps to itself. */
    uint64_t max_tensor_bytes;
    /* A node the backend has no kernel for runs on the CPU, with copies around it (the
     * default; amp_session_stats names those ops); no_fallback makes it an error at open. */
    bool no_fallback;
    /* CUDA: float32 GEMMs and convolutions may use TF32 tensor cores (faster, 10-bit
     * mantissa products); the default is a true FP32 baseline. AMP_TF32=1 does the same
     * unless ignore_env. Other backends ignore it. */
    bool tf32;
    /* onnxruntime-training's artifacts: the model opened is their training_model.onnx;
     * with ort_optimizer (its optimizer_model.onnx) and ort_checkpoint (its checkpoint) it
     * is first imported as one training model (the parameters' values, AdamW in a
     * training_info; passes/passes.h amp_ort_import), before AMP_AUTO's rewrite. */
    const char *ort_optimizer, *ort_checkpoint;
    double learning_rate; /* with ort_optimizer: > 0 replaces the checkpoint's */
    /* The CPU backend's threads (oneDNN's OpenMP and OpenBLAS): > 0 replaces AMP_THREADS;
     * 0 reads AMP_THREADS (unless ignore_env), else the libraries' default, the CPUs the
     * process may use. Process-wide, as those libraries' thread pools are: the last session
     * opened with it sets it. A bad AMP_THREADS fails the open (AMP_ERR_USAGE). */
    int threads;
    /* Data-parallel training (docs/parallel.md): the session is one rank of an MPI job, its
     * training steps' gradients the mean over the ranks (each rank gives its own slice of
     * the batch). AMP_DATA_PARALLEL_AUTO (0): join the job when an MPI launcher started
     * this process with more than one rank (OMPI_COMM_WORLD_SIZE or PMI_SIZE above 1, or
     * PMIX_RANK; not read with ignore_env); _MPI: always (MPI initialised once per process;
     * AMP_ERR_UNSUPPORTED when the plugin libampc_mpi.so is not found: beside the executable
     * or the library, or AMP_MPI_PLUGIN; a job of one rank runs as without MPI, except on
     * CUDA, where it is a one-rank NCCL communicator); _OFF: never. AUTO reads
     * AMP_DATA_PARALLEL (auto, mpi, off) unless ignore_env. Every rank must open the same model
     * with the same options: the open compares a hash of both across the ranks and refuses
     * a mismatch naming the ranks that differ. */
    int data_parallel;
    /* Seconds a collective waits for the other ranks before the whole job is ended with a
     * message naming the ranks that did not arrive (0: AMP_COMM_TIMEOUT unless ignore_env,
     * else 300). */
    double comm_timeout;
    /* The training steps' loss, an output's name (AmpSessionStats.loss reports its value):
     * NULL, the one scalar float output whose name holds "loss" (as `ampc run` finds it); a
     * name no output has fails the open (AMP_ERR_USAGE). */
    const char *loss;
    /* New fields go here, at the end (see "Options structs" above). */
} AmpSessionOptions;

enum { AMP_DATA_PARALLEL_AUTO = 0, AMP_DATA_PARALLEL_MPI = 1, AMP_DATA_PARALLEL_OFF = 2 };

#define AMP_SESSION_OPTIONS_INIT {.struct_size = sizeof(AmpSessionOptions)}
/* *opt = AMP_SESSION_OPTIONS_INIT: the defaults, for callers that cannot use the macro
 * (another language's FFI). */
AMP_API void amp_session_options_init(AmpSessionOptions *opt);

/* Opens a model file (external data beside it; "-": standard input, read to its end, with
 * no external data). opt may be NULL. */
AMP_API AmpCode amp_session_open(const char *path, const AmpSessionOptions *opt, AmpSession **out,
                                 AmpStatus *st);
/* Opens a model from memory; `dir` is where external data is found (NULL: none allowed). */
AMP_API AmpCode amp_session_open_bytes(const void *data, size_t len, const char *dir,
                                       const AmpSessionOptions *opt, AmpSession **out, AmpStatus *st);
AMP_API void amp_session_close(AmpSession *s);

/* ---- what the model takes and gives ------------------------------------------------- */

/* Inference (amp_session_run) or a training step (amp_session_train_step). */
typedef enum AmpMode { AMP_MODE_RUN = 0, AMP_MODE_TRAIN = 1 } AmpMode;

typedef struct AmpIoInfo {
    const char *name;
    int dtype;                                  /* 0 when the model does not say */
    int rank;                                   /* -1 when the model does not say */
    int64_t dims[AMP_TENSOR_MAX_RANK];          /* -1 where not fixed */
    const char *dim_params[AMP_TENSOR_MAX_RANK]; /* symbolic names (or NULL) */
    bool optional;       /* an input with a default (an initializer) */
    int64_t index_bound; /* > 0: an index input (a loss's class labels, Gather indices):
                            valid values lie in [0, index_bound) */
} AmpIoInfo;

/* Inputs: RUN: the main graph's inputs; TRAIN: those, then each training algorithm's own
 * inputs (a name both declare is given once). Outputs: RUN: the main graph's outputs;
 * TRAIN: those, then each algorithm's outputs. */
AMP_API size_t amp_session_input_count(const AmpSession *s, AmpMode mode);
AMP_API size_t amp_session_output_count(const AmpSession *s, AmpMode mode);
/* false when i is out of range */
AMP_API bool amp_session_input_info(const AmpSession *s, AmpMode mode, size_t i, AmpIoInfo *out);
AMP_API bool amp_session_output_info(const AmpSession *s, AmpMode mode, size_t i, AmpIoInfo *out);

/* Whether the model carries a training algorithm (ONNX training_info). */
AMP_API bool amp_session_has_training_info(const AmpSession *s);

/* ---- running ------------------------------------------------------------------------ */

/* Inference: runs the main graph on `inputs` (by name; every input without a default must
 * be given, with the declared dtype and fixed dims, else AMP_ERR_USAGE naming it) and
 * fills outputs[i] with the output named output_names[i]; output_names NULL means every
 * graph output in order, and then n_outputs must be at least amp_session_output_count.
 * Output data is malloc'd: free each with amp_tensor_view_free; output names point into
 * the session (valid until close). On failure no output is left allocated. Weights are the
 * session's current state. A session runs one call at a time (no locking inside). */
AMP_API AmpCode amp_session_run(AmpSession *s, const AmpTensorView *inputs, size_t n_inputs,
                                const char *const *output_names, size_t n_outputs, AmpTensorView *outputs,
                                AmpStatus *st);

/* One training step, inputs and outputs as amp_session_run with mode TRAIN.
 * - With training_info (ONNX TrainingInfoProto): for each training_info in order, the main
 *   graph and its algorithm run as one graph (the algorithm reads the main graph's values),
 *   then every update_binding is applied: the bound initializer (of the main graph or of
 *   the algorithm) takes the algorithm output's value, so the next step (and
 *   amp_session_run) sees the new weights and optimizer state. They live in
 *   session-owned buffers between steps.
 * - Without training_info (backward inside the main graph): the main graph runs once in
 *   training mode (Dropout draws masks) and its outputs (loss, gradients or new weights)
 *   are returned; nothing is applied: the caller updates weights with
 *   amp_session_state_set.
 * The step counter (amp_session_stats) advances only when the step succeeds. */
AMP_API AmpCode amp_session_train_step(AmpSession *s, const AmpTensorView *inputs, size_t n_inputs,
                                       const char *const *output_names, size_t n_outputs,
                                       AmpTensorView *outputs, AmpStatus *st);

/* ---- state: weights, optimizer state, loss-scale state ----------------------------- */

/* The state is every initializer a training_info binds (update_binding and
 * initialization_binding keys: weights, optimizer state, the loss-scale state), whether
 * of the main graph or of that training_info's algorithm graph (as ONNX allows: a
 * momentum buffer or step count kept in the algorithm); for a model without bindings,
 * every initializer of the main graph. Entries are named by their initializers. */
AMP_API size_t amp_session_state_count(const AmpSession *s);
/* State entry i, copied out of the device into a host buffer the session keeps (data
 * borrowed until the next state_at of the same entry, or close; it does not follow later
 * steps). false when i is out of range or the copy fails. */
AMP_API bool amp_session_state_at(const AmpSession *s, size_t i, AmpTensorView *out);
/* Replaces the value of the state entry t->name: same dtype and shape, else
 * AMP_ERR_USAGE naming it. The bytes are copied. */
AMP_API AmpCode amp_session_state_set(AmpSession *s, const AmpTensorView *t, AmpStatus *st);

/* A checkpoint: an ONNX model file whose initializers are the state entries (bit-exact
 * raw data) and whose metadata_props hold the step counter and RNG state, so it opens with
 * onnx.load. Written atomically (temporary file, then rename). */
AMP_API AmpCode amp_session_state_save(AmpSession *s, const char *path, AmpStatus *st);
/* Loads a checkpoint written by amp_session_state_save for the same model: every state
 * entry must be there with its dtype and shape, and nothing else; on failure the state is
 * unchanged. */
AMP_API AmpCode amp_session_state_load(AmpSession *s, const char *path, AmpStatus *st);

/* ---- export: the trained model back out ------------------------------------------- */

/* Initialise with AMP_EXPORT_OPTIONS_INIT ("Options structs" above). */
typedef struct AmpExportOptions {
    size_t struct_size;   /* sizeof(AmpExportOptions) as the caller compiled it */
    /* ONNX dtype of the export: 0 or 1 (float): FP32, no conversion (a model the session
     * holds converted already keeps its 16-bit forward as it is); 10 (float16) or 16
     * (bfloat16): the inference model goes through the ordinary conversion pipeline (the
     * amp pass: 16-bit ops and weights, float32 inputs and outputs). */
    int precision;
    const char *loss;     /* the loss's name in the main graph; NULL: the one output named
                             like a loss, as the amp pass finds it */
    bool no_value_info;   /* write no value_info entries of ampc's own */
    char *summary;        /* when not NULL: one line saying what was cut (summary_len bytes) */
    size_t summary_len;
    /* New fields go here, at the end. */
} AmpExportOptions;

#define AMP_EXPORT_OPTIONS_INIT {.struct_size = sizeof(AmpExportOptions)}

/* Writes the session's model as the inference model a user deploys, with the session's
 * current weights (after its training steps or a state_load): the main graph's forward
 * only (no loss, backward, optimizer, loss-scaling state, training_info; graph inputs and
 * initializers it does not read removed; passes/passes.h, amp_export_model), converted
 * when opt->precision asks. Written atomically (external data beside it when over 2 GB).
 * The session is unchanged. A model with no inference output left is AMP_ERR_INPUT. */
AMP_API AmpCode amp_session_export(AmpSession *s, const char *path, const AmpExportOptions *opt, AmpStatus *st);

/* ---- reports ------------------------------------------------------------------------ */

typedef struct AmpSessionStats {
    uint64_t steps;            /* training steps taken (and restored by state_load) */
    size_t intermediate_bytes; /* peak bytes of intermediates: the planned arenas, or what
                                  was live at once before a plan exists */
    size_t state_bytes;        /* bytes of the state entries */
    bool planned;              /* intermediates run from a planned arena */
    bool amp_applied;          /* AMP_AUTO rewrote the model at open */
    size_t values_sized;       /* intermediates whose shapes were known before the last step ran */
    size_t values_dynamic;     /* intermediates sized only when their node was reached */
    size_t syncs;              /* last step: small values read back from the device to size nodes */
    size_t fallback_nodes;     /* nodes the backend lacks, run on the CPU with copies around them */
    const char *fallback_ops;  /* their op types and counts, "Relu x3, Conv x1" ("" when none);
                                  valid until the next call or close */
    const char *backend;       /* "cpu", "sim", "cuda" */
    size_t host_reads;         /* copies out of the device in the last run or training step:
                                  the outputs asked for, and anything the step had to read back
                                  (a CPU-fallback node's inputs, a shape or a loop condition
                                  computed on the device); CUDA and sim, 0 on the CPU */
    size_t fused_nodes;        /* fused kernels in the plan (see no_fuse) ... */
    size_t absorbed_nodes;     /* ... and the model's nodes they run */
    const char *fused_ops;     /* their kinds and counts, "FusedElementwise x4, UnscaleCheck x1,
                                  Adam+gate x1" (main graph, then algorithms); valid as fallback_ops */
    size_t device_bytes;       /* CUDA: device memory the session holds now (cudaMemGetInfo's
                                  use against that before it opened: weights, arena, cached
                                  buffers, library workspaces); 0 elsewhere */
    size_t kernel_syncs;       /* CUDA: small inputs its kernels read back (Slice bounds ...),
                                  over the session's life */
    /* With AMP_AUTO: the type the rewrite used, "fp16" or "bf16", or "fp32" when precision
     * auto kept the model float32 (amp_applied false); "" without AMP_AUTO. */
    const char *amp_precision;
    const char *amp_precision_why; /* why auto chose it (one sentence); "" when not auto */
    /* The fields above are version 0.1's; amp_session_stats_sized fills those below too. */
    double step_ms_last, step_ms_mean; /* wall time of amp_session_train_step, inside the
                                          library: the last step's and the mean over the
                                          session's steps (0 before one) */
    double run_ms_last, run_ms_mean;   /* the same for amp_session_run */
    /* The training steps' report, read from the outputs each step copied out (a step reads
     * nothing back unless asked: a step whose output_names leave one of these out leaves it
     * NaN, or uncounted). */
    const char *loss_name; /* the loss output (AmpSessionOptions.loss, else the one named like
                              a loss); "" when there is none, or several */
    double loss;           /* its value after the last step (NaN before one, or without it) */
    /* A loss-scaled model's scale now (its state amp_loss_scale, read at this call; with the
     * scale as a graph input, the last step's amp_loss_scale_new); NaN without loss scaling. */
    double loss_scale;
    uint64_t skipped_steps; /* steps whose gradients held inf/NaN (amp_found_inf), their update
                               skipped: over the session's life (not in checkpoints) */
    size_t peak_bytes;      /* intermediate_bytes + state_bytes ("peak memory" of ampc run) */
    /* New fields go here, at the end. */
} AmpSessionStats;

/* The stats struct is an output: a caller built against an older ampc.h hands a smaller one.
 * amp_session_stats_sized fills the first `size` bytes, sizeof(AmpSessionStats) as the caller
 * compiled it (the fields it knows); amp_session_stats fills version 0.1's fields only (up to
 * amp_precision_why), as programs built against 0.1 expect. */
AMP_API void amp_session_stats_sized(const AmpSession *s, AmpSessionStats *out, size_t size);
AMP_API void amp_session_stats(const AmpSession *s, AmpSessionStats *out);

/* The device time of the kernels of the runs and steps since the last call, in ms (CUDA:
 * events around each graph's kernels, after its inputs are in and before its outputs are
 * read back); -1 on a backend that does not time its kernels (the CPU). */
AMP_API double amp_session_device_ms(AmpSession *s);

/* ---- conversion and the caller's front (the Python package's entries) --------------- */

/* A model converted to mixed precision as `ampc MODEL -o OUT` converts it (the same phases,
 * runtime/conversion.c: load, verify, the default pipeline with these options, verify, save),
 * so the same model and options give the same bytes. The options are set by name, the
 * names of the Python package's keywords ("precision", "loss_scale", "allowlist_add",
 * "keep_fp32", "keep_io_types", ...: amp_convert_option_name lists them), with the values
 * the command's flags take, checked by the same table (passes/options.c): a refused one is
 * AMP_ERR_USAGE, "precision='fp8': expected ...". No environment variable is read. An
 * options object serves any number of conversions; NULL options are the defaults. */
typedef struct AmpConvertOptions AmpConvertOptions; /* opaque */
AMP_API AmpCode amp_convert_options_new(AmpConvertOptions **out, AmpStatus *st);
AMP_API void amp_convert_options_free(AmpConvertOptions *opt);
/* value: as the flag's (NULL or "" for an option that takes none: "keep_io_types"); the
 * bytes are copied. List options ("allowlist_add", "keep_fp32") add up, others replace. */
AMP_API AmpCode amp_convert_option_set(AmpConvertOptions *opt, const char *name, const char *value, AmpStatus *st);
/* The i-th option's name (NULL past the last); *takes_value, when not NULL, says whether it
 * takes a value. */
AMP_API const char *amp_convert_option_name(size_t i, bool *takes_value);
/* Converts the model in len bytes at `model` (external data found in dir; NULL: none
 * allowed) into *out (*out_len bytes, free with amp_free). *summary, when summary is not
 * NULL: malloc'd text (free with amp_free), "N nodes (M before), passes: LIST; amp: ..."
 * (nodes in 16 bits, casts, what was kept in float32 and why), then the passes' other
 * notices a line each. */
AMP_API AmpCode amp_convert_bytes(const void *model, size_t len, const char *dir, const AmpConvertOptions *opt,
                                  void **out, size_t *out_len, char **summary, AmpStatus *st);
/* The same from file src to file dst, written atomically, with external data beside it
 * when over 2 GB (src's own external data is read from beside src). */
AMP_API AmpCode amp_convert_file(const char *src, const char *dst, const AmpConvertOptions *opt, char **summary,
                                 AmpStatus *st);
/* The training model `ampc grad MODEL -o TRAIN` makes of an inference model (the same phases,
 * runtime/grad_api.c: load, the loss, backward and optimizer, verify, save), so the same
 * model and options give the same bytes. Options are set by name, the names of the Python
 * package's keywords ("loss", "optimizer", "lr", "freeze", "train_mode", ...:
 * amp_grad_option_name lists them), with the values the command's flags take, checked by the
 * same table (passes/grad_options.c); a refused one is AMP_ERR_USAGE, "lr='x': expected ...".
 * "freeze" adds up, the others replace; "train_mode" takes no value. An options object
 * serves any number of calls; NULL options are the defaults (cross-entropy, SGD). */
typedef struct AmpGradSettings AmpGradSettings; /* opaque */
AMP_API AmpCode amp_grad_options_new(AmpGradSettings **out, AmpStatus *st);
AMP_API void amp_grad_options_free(AmpGradSettings *opt);
AMP_API AmpCode amp_grad_option_set(AmpGradSettings *opt, const char *name, const char *value, AmpStatus *st);
AMP_API const char *amp_grad_option_name(size_t i, bool *takes_value);
/* As amp_convert_bytes and amp_convert_file; *summary: "loss 'NAME', N parameters with
 * gradients and OPT updates, ...; M nodes added" (what `ampc grad` says before " -> TRAIN"). */
AMP_API AmpCode amp_grad_bytes(const void *model, size_t len, const char *dir, const AmpGradSettings *opt,
                               void **out, size_t *out_len, char **summary, AmpStatus *st);
AMP_API AmpCode amp_grad_file(const char *src, const char *dst, const AmpGradSettings *opt, char **summary,
                              AmpStatus *st);
/* Frees what amp_convert_bytes, amp_convert_file, amp_grad_bytes and amp_grad_file returned. */
AMP_API void amp_free(void *p);

/* How the library's messages name an option, for the process (set once, before any other
 * call): AMP_CALLER_C (the default: an AmpSessionOptions field, or its variable),
 * AMP_CALLER_CLI (the ampc command's flags), AMP_CALLER_PYTHON (keywords). */
enum { AMP_CALLER_C = 0, AMP_CALLER_CLI = 1, AMP_CALLER_PYTHON = 2 };
AMP_API void amp_set_front(int caller);

#ifdef __cplusplus
}
#endif

#endif
