/* The ampc command's options, in one X-macro table: tools/ampc.c builds its getopt_long
 * table and its --help text from it, and tests/tools/test_cli.c checks that --help lists
 * every option the binary accepts. Add an option here and nowhere else. */
#ifndef AMPC_CLI_OPTIONS_H
#define AMPC_CLI_OPTIONS_H

/* AMPC_OPT(id, "long name", short letter or 0, takes an argument (0/1), "METAVAR", "help") */
#define AMPC_OPTIONS(AMPC_OPT)                                                                  \
    AMPC_OPT(OUTPUT, "output", 'o', 1, "OUT",                                                   \
             "write the converted model to OUT (atomically; OUT may be MODEL itself)")          \
    AMPC_OPT(PASSES, "passes", 0, 1, "LIST",                                                    \
             "comma-separated passes to run instead of the default pipeline; 'none' runs none") \
    AMPC_OPT(DUMP_AFTER, "dump-after", 0, 1, "PASS",                                            \
             "print the IR to stdout after PASS has run (PASS must be in the pipeline)")        \
    AMPC_OPT(PRINT, "print", 0, 0, "", "print the final IR to stdout")                          \
    AMPC_OPT(EXTERNAL_DATA, "external-data", 0, 1, "MODE",                                      \
             "auto|always|never: tensors of 1 KiB or more go to OUT.data beside OUT; auto "     \
             "(the default) does that only when one file would exceed 2GB")                     \
    AMPC_OPT(NO_VERIFY, "no-verify", 0, 0, "",                                                  \
             "skip the verifier after the passes (the loader's own checks still run)")          \
    AMPC_OPT(QUIET, "quiet", 'q', 0, "", "no message on success (errors are still printed)")    \
    AMPC_OPT(STEPS, "steps", 0, 1, "N",                                                         \
             "run: N training steps (or N inference runs); default 1")                          \
    AMPC_OPT(INPUTS, "inputs", 0, 1, "DIR",                                                     \
             "run, bench: input data, ONNX TensorProto files input_0.pb, input_1.pb, ... "      \
             "matched to the model's inputs by name, else by order; without it, "              \
             "deterministic random data")                                                       \
    AMPC_OPT(OUTPUTS, "outputs", 0, 1, "DIR",                                                   \
             "run: after the last step, write its outputs (inference: the graph outputs; "      \
             "training: the main graph's, then the training algorithm's) to DIR/output_K.pb, "  \
             "K = 0, 1, ...: ONNX TensorProtos named after the outputs, data in raw_data; "     \
             "DIR is created if needed, each file is written atomically")                       \
    AMPC_OPT(BACKEND, "backend", 0, 1, "NAME",                                                  \
             "run, bench: cpu, cuda or auto (the default: CUDA when available, else the CPU)")  \
    AMPC_OPT(SEED, "seed", 0, 1, "S",                                                           \
             "run, bench: seed of the random inputs and of Dropout")                            \
    AMPC_OPT(DIM, "dim", 0, 1, "NAME=VALUE",                                                    \
             "run, bench: the size of symbolic dim NAME in random inputs (default 1); "         \
             "repeatable")                                                                      \
    AMPC_OPT(LOSS, "loss", 0, 1, "NAME",                                                        \
             "run: the loss output to print (default: the one scalar output named like "        \
             "'loss')")                                                                          \
    AMPC_OPT(LOAD_STATE, "load-state", 0, 1, "FILE",                                            \
             "run: start from the weights and optimizer state of a checkpoint FILE")            \
    AMPC_OPT(SAVE_STATE, "save-state", 0, 1, "FILE",                                            \
             "run: after the steps, save the state (weights, optimizer and loss-scale state, "  \
             "step counter) to FILE, an ONNX file")                                              \
    AMPC_OPT(ITERS, "iters", 0, 1, "N", "bench: N timed runs; default 20")                      \
    AMPC_OPT(WARMUP, "warmup", 0, 1, "W", "bench: W untimed runs first; default 3")            \
    AMPC_OPT(TRAIN, "train", 0, 0, "",                                                          \
             "bench: time training steps (updates applied) instead of inference runs")          \
    AMPC_OPT(HELP, "help", 'h', 0, "", "print this help and exit")                              \
    AMPC_OPT(VERSION, "version", 0, 0, "", "print the version and exit")

#endif
