/* The ampc command's options, in one X-macro table: tools/ampc.c builds its getopt_long
 * table and its --help text from it, and tests/tools/test_cli.c checks that --help lists
 * every option the binary accepts. Add an option here and nowhere else. */
#ifndef AMPC_CLI_OPTIONS_H
#define AMPC_CLI_OPTIONS_H

/* AMPC_OPT(id, "long name", short letter or 0, takes an argument (0/1), "METAVAR", "help") */
#define AMPC_OPTIONS(AMPC_OPT)                                                                  \
    AMPC_OPT(OUTPUT, "output", 'o', 1, "OUT",                                                   \
             "write the converted model to OUT (atomically; OUT may be MODEL itself, a link, "     \
             "or a device such as /dev/null; '-' is standard output, when it is not a terminal "   \
             "and nothing else prints there); calibrate: the statistics file to write; export: the "  \
             "inference model to write")                                                  \
    AMPC_OPT(PASSES, "passes", 0, 1, "LIST",                                                    \
             "comma-separated passes to run instead of the default pipeline; 'none' runs none") \
    AMPC_OPT(DUMP_AFTER, "dump-after", 0, 1, "PASS",                                            \
             "print the IR to stdout after PASS has run (PASS must be in the pipeline)")        \
    AMPC_OPT(PRINT, "print", 0, 0, "", "print the final IR to stdout")                          \
    AMPC_OPT(REPORT, "report", 0, 0, "",                                                        \
             "print to stdout, after the passes: 'converted X of Y float nodes using N "        \
             "casts', the casts by direction, the 16-bit share of MatMul/Gemm/Conv FLOPs "     \
             "(static shapes) and a table per op type")                                         \
    AMPC_OPT(DUMP_DOT, "dump-dot", 0, 1, "FILE",                                                \
             "write the final graph to FILE (atomically; '-': standard output) as Graphviz DOT: " \
             "nodes coloured by "                                                               \
             "precision, casts drawn apart, edges labelled with dtypes, subgraphs as "          \
             "clusters; render with 'dot -Tsvg FILE'")                                          \
    AMPC_OPT(DOT_COLLAPSE, "dot-collapse", 0, 0, "",                                            \
             "with --dump-dot: merge each chain of one-input, one-output nodes of one "         \
             "precision into one box, so big graphs stay readable")                             \
    AMPC_OPT(DOT_INITIALIZERS, "dot-initializers", 0, 0, "",                                    \
             "with --dump-dot: draw initializers too (hidden by default)")                      \
    AMPC_OPT(EXTERNAL_DATA, "external-data", 0, 1, "MODE",                                      \
             "auto|always|never: tensors of 1 KiB or more go to OUT.data beside OUT; auto "     \
             "(the default) does that only when one file would exceed 2GB")                     \
    AMPC_OPT(NO_VALUE_INFO, "no-value-info", 0, 0, "",                                          \
             "write no value_info entries of its own: by default the output lists the type "    \
             "of every intermediate value whose type is known (entries the input had are kept "  \
             "either way)")                                                                     \
    AMPC_OPT(PRECISION, "precision", 0, 1, "TYPE",                                              \
             "fp16 (the default; float16 and half are the same), bf16 (bfloat16) or auto: the "  \
             "16-bit type of the amp pass; auto is the type this machine runs fastest: fp16 "   \
             "with a GPU, bf16 on a CPU with bf16 dot products (AVX512-BF16, AMX-BF16), and on " \
             "a CPU without them none (the model stays float32: fp16 gains nothing on a CPU "   \
             "without AVX512-FP16/AMX-FP16, whose fp16 kernels widen to float32), said in the " \
             "summary line; AMP_AUTO sessions default to auto; export: fp32 (the default: no " \
             "conversion), fp16, bf16 or auto")                                                 \
    AMPC_OPT(LEVEL, "level", 0, 1, "LEVEL",                                                     \
             "default, tensor-cores-only (only allow-list ops become 16-bit), "                 \
             "treat-infer-as-deny (infer-list ops stay fp32), unsafe-force-all (every "         \
             "op of the four lists becomes 16-bit where it can) or norms-16 (LayerNormalization " \
             "and RMSNorm in 16 bits, float32 statistics: fewer casts, a 16-bit residual "      \
             "stream; about 2x the error of the default on transformers)")                      \
    AMPC_OPT(OPSET_UPGRADE, "opset-upgrade", 0, 1, "MODE",                                      \
             "auto (the default), never or N: raise the model's ai.onnx opset when the 16-bit "    \
             "type needs a newer one (bf16 Conv: 22), adapting the ops that changed on the way; " \
             "a number N (7-22) raises it to at least N")                                                \
    AMPC_OPT(ALLOW, "allow", 0, 1, "OPS",                                                       \
             "add ops (comma-separated ONNX op types: MatMul,com.microsoft:FusedGemm) to the "  \
             "allow list: always 16-bit; AMP_ALLOWLIST_ADD and the other list variables are "   \
             "read too; an op added to two lists is an error; repeatable")                      \
    AMPC_OPT(INFER, "infer", 0, 1, "OPS",                                                       \
             "add ops to the infer list: 16-bit between 16-bit neighbours; repeatable")         \
    AMPC_OPT(CLEAR, "clear", 0, 1, "OPS",                                                       \
             "add ops to the clear list: follow their neighbours; repeatable")                  \
    AMPC_OPT(DENY, "deny", 0, 1, "OPS",                                                         \
             "add ops to the deny list: always fp32, and fp32 spreads forward from them; "      \
             "repeatable")                                                                      \
    AMPC_OPT(KEEP_FP32, "keep-fp32", 0, 1, "GLOB",                                              \
             "nodes whose name matches GLOB (fnmatch: 'head/*') stay fp32, as deny nodes; "     \
             "repeatable")                                                                      \
    AMPC_OPT(KEEP_IO_TYPES, "keep-io-types", 0, 0, "",                                          \
             "graph inputs and outputs keep their fp32 types, with Casts at the boundary (the " \
             "default)")                                                                        \
    AMPC_OPT(NO_KEEP_IO_TYPES, "no-keep-io-types", 0, 0, "",                                    \
             "main-graph inputs read by 16-bit nodes and outputs they write become 16-bit")     \
    AMPC_OPT(LOSS_SCALE, "loss-scale", 0, 1, "MODE",                                            \
             "dynamic, a number (up to float32's largest, 3.4e38), or none: loss scaling of "    \
             "training graphs (GradScaler "                                                      \
             "semantics; a number is a static scale that keeps the gradient check); default "   \
             "dynamic for fp16, none for bf16; inference graphs are left as they are")          \
    AMPC_OPT(LOSS_SCALE_STATE, "loss-scale-state", 0, 1, "WHERE",                               \
             "initializers (the default: the scale and growth tracker are initializers, updated " \
             "by update_binding) or inputs (plain graph inputs the caller feeds, reading back "   \
             "amp_loss_scale_new and amp_growth_tracker_new: for onnxruntime-training's Module, "  \
             "which runs no training_info: with the default there the scale restarts at its "    \
             "initial value every step)")                                                         \
    AMPC_OPT(LOSS_SCALE_INIT, "loss-scale-init", 0, 1, "S",                                     \
             "dynamic loss scaling: the initial scale (default 65536); calibrate: the scale "  \
             "gradients are judged at")                         \
    AMPC_OPT(GROWTH_INTERVAL, "growth-interval", 0, 1, "N",                                     \
             "dynamic loss scaling: grow the scale after N steps without inf/NaN (default "     \
             "2000)")                                                                           \
    AMPC_OPT(GROWTH_FACTOR, "growth-factor", 0, 1, "F",                                         \
             "dynamic loss scaling: multiply the scale by F > 1 when it grows (default 2)")     \
    AMPC_OPT(BACKOFF_FACTOR, "backoff-factor", 0, 1, "F",                                       \
             "dynamic loss scaling: multiply the scale by 0 < F < 1 after a step with inf/NaN " \
             "gradients (default 0.5)")                                                         \
    AMPC_OPT(CALIBRATION, "calibration", 0, 1, "STATS",                                         \
             "measured ranges from 'ampc calibrate': nodes that "                                 \
             "read or write a value whose recorded |x| passes --calib-max-activation, or stays " \
             "below --calib-min-activation, stay fp32; "                                        \
             "a training graph's gradients that would underflow are reported with advice")      \
    AMPC_OPT(CALIB_MAX_ACTIVATION, "calib-max-activation", 0, 1, "X",                           \
             "with --calibration, fp16: the largest recorded |x| a 16-bit node may see (default 4096: " \
             "65504/16, four binary orders of headroom; ModelOpt uses 512)")                     \
    AMPC_OPT(CALIB_MIN_ACTIVATION, "calib-min-activation", 0, 1, "X",                           \
             "with --calibration, fp16: a value whose largest recorded |x| is non-zero but below X " \
             "keeps its nodes fp32 (default 6.1e-5 = 2^-14, fp16's smallest normal: the whole "   \
             "value would be subnormal); 0 turns this off")                                      \
    AMPC_OPT(TOP, "top", 0, 1, "N", "compare: list the N nodes of largest local error (default 10)") \
    AMPC_OPT(EXPLAIN, "explain", 0, 1, "NODE",                                                  \
             "print to stdout the chain of rules that set the precision of the node(s) named "  \
             "NODE (an unknown name is a usage error); repeatable: each NODE in turn")                                         \
    AMPC_OPT(NO_VERIFY, "no-verify", 0, 0, "",                                                  \
             "skip the verifier after the passes (the loader's own checks still run)")          \
    AMPC_OPT(QUIET, "quiet", 'q', 0, "", "no message on success (errors are still printed)")    \
    AMPC_OPT(TIME, "time", 0, 0, "",                                                            \
             "print to stderr the time each phase took (load, each pass, verify, save, total), " \
             "one line per phase, in ms: wall, and the main thread's CPU; printed when the run " \
             "ends, so the times leave out their own printing")                                 \
    AMPC_OPT(STEPS, "steps", 0, 1, "N",                                                         \
             "run: N training steps (or N inference runs); calibrate: N steps or runs per "     \
             "input set; default 1")                          \
    AMPC_OPT(INPUTS, "inputs", 0, 1, "DIR",                                                     \
             "run, bench, calibrate, compare: input data, ONNX TensorProto files input_0.pb, "  \
             "input_1.pb, ... (calibrate: repeatable, one run per folder) "                     \
             "matched to the model's inputs by name, else by order; without it, "              \
             "deterministic random data")                                                       \
    AMPC_OPT(OUTPUTS, "outputs", 0, 1, "DIR",                                                   \
             "run: after the last step, write its outputs (inference: the graph outputs; "      \
             "training: the main graph's, then the training algorithm's) to DIR/output_K.pb, "  \
             "K = 0, 1, ...: ONNX TensorProtos named after the outputs, data in raw_data; "     \
             "DIR is created if needed, each file is written atomically")                       \
    AMPC_OPT(INPUTS_PER_RANK, "inputs-per-rank", 0, 1, "DIR",                                   \
             "run, bench, under mpirun (data parallel, docs/parallel.md): each rank's own input "  \
             "data, DIR with '{rank}' replaced by the rank (data/{rank}), else DIR/rank0, "       \
             "DIR/rank1, ...; without it, each rank takes its 1/N slice of the batch (axis 0) of " \
             "every input whose first dim is the batch's")                                      \
    AMPC_OPT(BACKEND, "backend", 0, 1, "NAME",                                                  \
             "run, bench, calibrate: cpu, cuda, auto or sim (auto, the default: AMP_BACKEND when set, " \
             "else CUDA when available, else the CPU; sim: the device simulator of the tests, " \
             "the CPU kernels behind memory the runtime cannot read)")                          \
    AMPC_OPT(NO_FALLBACK, "no-fallback", 0, 0, "",                                              \
             "run, bench: a node the backend has no kernel for is an error (exit 3) instead of " \
             "running on the CPU with copies around it")                                        \
    AMPC_OPT(NO_FUSE, "no-fuse", 0, 0, "",                                                      \
             "run, bench: run every node as the model has it instead of fusing, on CUDA (and "   \
             "sim), elementwise chains, the loss-scaling check and the update gates into fewer " \
             "kernels (the results are the same), and on the CPU float32 arithmetic chains and " \
             "ampc grad's convolution weight gradients into ConvGrad (the same within float32 " \
             "reassociation); for "                                                             \
             "comparing and debugging")                                                         \
    AMPC_OPT(TF32, "tf32", 0, 0, "",                                                            \
             "run, bench: on CUDA, float32 GEMMs and convolutions may use TF32 tensor cores "    \
             "(AMP_TF32=1 too); the default is a true FP32 baseline")                           \
    AMPC_OPT(THREADS, "threads", 0, 1, "N",                                                     \
             "run, bench: the CPU backend's threads (oneDNN's OpenMP threads and OpenBLAS's; "  \
             "AMP_THREADS, which this flag replaces; default: the CPUs the process may use)")   \
    AMPC_OPT(MAX_ITERATIONS, "max-iterations", 0, 1, "N",                                      \
             "run, bench: stop (exit 3) when a Loop or Scan node runs more than N iterations "  \
             "in one run (default: no cap; a Loop's trip count can be 2^63)")                  \
    AMPC_OPT(TIMEOUT, "timeout", 0, 1, "SECONDS",                                               \
             "run, bench: stop (exit 3) a run or training step that takes longer than SECONDS " \
             "(checked between nodes and Loop iterations)")                                     \
    AMPC_OPT(SEED, "seed", 0, 1, "S",                                                           \
             "run, bench, calibrate, compare: seed of the random inputs and of Dropout")                            \
    AMPC_OPT(DIM, "dim", 0, 1, "NAME=VALUE",                                                    \
             "run, bench, calibrate, compare: the size of symbolic dim NAME in random inputs "         \
             "(default 1); repeatable")                                                        \
    AMPC_OPT(LOSS, "loss", 0, 1, "NAME",                                                        \
             "the loss value: for the amp pass, whose loss subgraph stays fp32; for run, the "  \
             "loss output to print (default: the one scalar float output named like 'loss'); "   \
             "for grad: cross-entropy (the default: SoftmaxCrossEntropyLoss over the output and " \
             "an int64 input 'labels' shaped like the output less its class axis), mse (the mean squared difference to a float input "  \
             "'target' shaped like the output), or NAME, a scalar output that is the loss; "    \
             "for export: the loss output cut away with the backward")                          \
    AMPC_OPT(LOSS_OUTPUT, "loss-output", 0, 1, "NAME",                                          \
             "grad: the model output the loss reads (default: the first float output)")        \
    AMPC_OPT(CLASS_AXIS, "class-axis", 0, 1, "K",                                               \
             "grad --loss cross-entropy: the output's axis of classes, 1 or the last (-1, the "  \
             "default): [N, C] or [B, T, V] logits (the labels then [B, T]) take -1, [N, C, H, W] " \
             "ones 1 (labels [N, H, W])")                                                       \
    AMPC_OPT(LABELS, "labels", 0, 1, "NAME",                                                    \
             "grad: the input holding the labels (cross-entropy) or the target (mse); made if " \
             "the model lacks it (default: 'labels' / 'target')")                              \
    AMPC_OPT(FREEZE, "freeze", 0, 1, "GLOB",                                                    \
             "grad: initializers whose name matches GLOB (fnmatch) get no gradient and no "     \
             "update; repeatable (rank-0 initializers are constants anyway)")                   \
    AMPC_OPT(TRAIN_MODE, "train-mode", 0, 0, "",                                                \
             "grad: BatchNormalization on batch statistics (its running mean and var bound "  \
             "as state) and Dropout dropping, with their gradients")                            \
    AMPC_OPT(LOAD_STATE, "load-state", 0, 1, "FILE",                                            \
             "run: start from the weights and optimizer state of a checkpoint FILE; export: "  \
             "the weights to write (a checkpoint of 'ampc run --save-state')")                  \
    AMPC_OPT(SAVE_STATE, "save-state", 0, 1, "FILE",                                            \
             "run: after the steps, save the state (weights, optimizer and loss-scale state, "  \
             "step counter) to FILE, an ONNX file")                                              \
    AMPC_OPT(OPTIMIZER, "optimizer", 0, 1, "FILE",                                              \
             "MODEL is onnxruntime-training's training_model.onnx and FILE its "                \
             "optimizer_model.onnx (AdamWOptimizer or SGDOptimizerV2): import them as one ONNX " \
             "training model (parameters from --checkpoint as initializers, the optimizer as "  \
             "standard ops in a training_info), then convert, run, bench or export it; for grad: the " \
             "optimizer to append, with torch.optim's arithmetic: sgd (the default), momentum " \
             "(SGD with momentum) or adam (bias-corrected; its moments and step count are "     \
             "state tensors bound like the parameters)")                                        \
    AMPC_OPT(CHECKPOINT, "checkpoint", 0, 1, "FILE",                                            \
             "with --optimizer: onnxruntime-training's checkpoint, the parameters' values (and " \
             "the optimizer's state once onnxruntime has saved one)")                           \
    AMPC_OPT(LR, "lr", 0, 1, "LR",                                                              \
             "with --optimizer: the learning rate (default: the checkpoint's, else 0.001 as "   \
             "onnxruntime); for grad: the learning rate (default 0.01; adam 0.001)")           \
    AMPC_OPT(MOMENTUM, "momentum", 0, 1, "MU",                                                  \
             "grad --optimizer momentum: buf = MU buf + g, p -= lr buf (default 0.9)")          \
    AMPC_OPT(BETA1, "beta1", 0, 1, "B1", "grad --optimizer adam: the first moment's decay (default 0.9)") \
    AMPC_OPT(BETA2, "beta2", 0, 1, "B2",                                                        \
             "grad --optimizer adam: the second moment's decay (default 0.999)")                \
    AMPC_OPT(EPS, "eps", 0, 1, "EPS", "grad --optimizer adam: added to the denominator (default 1e-8)") \
    AMPC_OPT(WEIGHT_DECAY, "weight-decay", 0, 1, "WD",                                          \
             "grad: weight decay (default 0): sgd and momentum add WD*p to the gradient "       \
             "(torch.optim.SGD), adam decays p by lr*WD apart from it (torch.optim.AdamW)")     \
    AMPC_OPT(ITERS, "iters", 0, 1, "N", "bench: N timed runs; default 20")                      \
    AMPC_OPT(WARMUP, "warmup", 0, 1, "W", "bench: W untimed runs first; default 3")            \
    AMPC_OPT(TRAIN, "train", 0, 0, "",                                                          \
             "bench: time training steps (updates applied) instead of inference runs")          \
    AMPC_OPT(COMPARE, "compare", 0, 0, "",                                                      \
             "bench: open MODEL twice, as it is (FP32) and rewritten by AMP_AUTO (AMP_* say "     \
             "how), time both interleaved on the same inputs and print a table: median and min " \
             "time, throughput, peak memory, the GEMMs' TFLOP/s, AMP's speed-up")               \
    AMPC_OPT(PLOT, "plot", 0, 1, "FILE",                                                        \
             "bench --compare: also draw every timed run's time, FP32 and AMP, as a PNG")       \
    AMPC_OPT(PROFILE, "profile", 0, 0, "",                                                      \
             "bench: also print where the timed runs' time went, by op type and the slowest "   \
             "nodes (host time between nodes: the CPU backend's kernel times)")                 \
    AMPC_OPT(HELP, "help", 'h', 0, "", "print this help and exit")                              \
    AMPC_OPT(VERSION, "version", 0, 0, "", "print the version and exit")

/* getopt_long values: one per option, above every short letter. */
enum {
    OPT__FIRST = 256,
#define AMPC_ENUM(id, name, sh, arg, meta, help) OPT_##id,
    AMPC_OPTIONS(AMPC_ENUM)
#undef AMPC_ENUM
    OPT__END
};

#endif
