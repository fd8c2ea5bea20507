#!/usr/bin/env python3
"""Regenerates the fuzz seed corpus (tests/fuzz/corpus): small conformance models copied
from libonnx-testdata, one truncated model, and hand-made models that reach the rarer
parts of the loader (training_info, functions, sparse initializers, unknown fields,
external data against the fuzzer's scratch folder). Needs `onnx` from PyPI.

Files named found_*.onnx are inputs the fuzzers found bugs with (each fixed, with a test
of its own); they are kept as seeds, and this script neither makes nor removes them."""
import os
import shutil
import sys

import onnx
from onnx import TensorProto, helper

TESTDATA = "/usr/share/libonnx-testdata/data"
COPY = """node/test_if node/test_loop11 node/test_scan_sum node/test_scan9_sum
node/test_gemm_default_scalar_bias node/test_constant node/test_relu
node/test_conv_with_strides_padding node/test_sequence_map_add_2_sequences
node/test_batchnorm_epsilon_training_mode node/test_adam node/test_optional_get_element_sequence
node/test_cast_FLOAT_to_STRING node/test_if_opt node/test_identity_sequence
node/test_reshape_extended_dims simple/test_gradient_of_add pytorch-converted/test_ConvTranspose2d
pytorch-operator/test_operator_add_broadcast node/test_split_zero_size_splits
node/test_resize_downsample_scales_linear node/test_tfidfvectorizer_tf_uniandbigrams_skip5
node/test_dynamicquantizelinear node/test_loop16_seq_none""".split()


def everything():
    """A model using training_info, a local function, metadata, a sparse initializer,
    value_info, doc strings, and fields newer than ONNX 1.12 (unknown to the loader)."""
    w = helper.make_tensor("W", TensorProto.FLOAT, [2, 2], [1.0, 2.0, 3.0, 4.0])
    s = helper.make_tensor("S", TensorProto.STRING, [2], [b"a", b""])
    sp = helper.make_sparse_tensor(
        helper.make_tensor("SP", TensorProto.FLOAT, [2], [1.0, 2.0]),
        helper.make_tensor("SP_i", TensorProto.INT64, [2], [0, 3]), [4])
    mm = helper.make_node("MatMul", ["X", "W"], ["H"], name="mm", doc_string="doc")
    call = helper.make_node("MyFunc", ["H"], ["Y"], name="call", domain="custom.domain")
    call.metadata_props.add(key="newer", value="field")  # NodeProto.metadata_props: ONNX >= 1.16
    g = helper.make_graph(
        [mm, call], "everything",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 2])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 2])],
        initializer=[w, s], value_info=[helper.make_tensor_value_info("H", TensorProto.FLOAT, ["N", 2])],
        sparse_initializer=[sp], doc_string="graph doc")
    fn = helper.make_function("custom.domain", "MyFunc", ["a"], ["b"],
                              [helper.make_node("Relu", ["a"], ["b"])], [helper.make_opsetid("", 13)])
    init = helper.make_graph([helper.make_node("Constant", [], ["W_init"], value=w)], "init", [],
                             [helper.make_tensor_value_info("W_init", TensorProto.FLOAT, [2, 2])])
    alg = helper.make_graph([helper.make_node("Neg", ["W"], ["W_new"])], "alg", [],
                            [helper.make_tensor_value_info("W_new", TensorProto.FLOAT, [2, 2])])
    ti = helper.make_training_info(alg, [("W", "W_new")], init, [("W", "W_init")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("custom.domain", 1)],
                          functions=[fn], producer_name="seed", model_version=3)
    m.training_info.append(ti)
    m.ir_version = 8
    helper.set_model_props(m, {"author": "ampc"})
    return m.SerializeToString()


def external(location, offset, length):
    """Y = Add(A, A) with A external in the fuzzer's scratch folder (see fuzz_load.c)."""
    a = TensorProto(name="A", data_type=TensorProto.FLOAT, dims=[4, 3])
    a.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", str(offset)), ("length", str(length))):
        e = a.external_data.add()
        e.key, e.value = k, v
    g = helper.make_graph([helper.make_node("Add", ["A", "A"], ["Y"])], "ext", [],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [4, 3])], initializer=[a])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m.SerializeToString()


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus")
    os.makedirs(out, exist_ok=True)
    for rel in COPY:
        shutil.copy(os.path.join(TESTDATA, rel, "model.onnx"), os.path.join(out, rel.split("/")[1] + ".onnx"))
    with open(os.path.join(TESTDATA, "node/test_loop11/model.onnx"), "rb") as f:
        loop = f.read()
    seeds = {
        "truncated_loop11.onnx": loop[: len(loop) // 2],
        "everything.onnx": everything(),
        "external_ok.onnx": external("weights.bin", 64, 48),
        "external_evil.onnx": external("evil.bin", 0, 48),
        "external_past_end.onnx": external("weights.bin", 4090, 48),
    }
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
