#!/usr/bin/env python3
"""Writes the rest of the real-model corpus (issue 36): small random-weight Hugging Face
models exported by PyTorch's ONNX exporter, built from configs (nothing downloaded), as
models/make_hf_exports.py writes hf_bert and hf_gpt2 (models/README.md, "Transformer
exports"; the corpus test is tests/models/test_llm_corpus.py):

  models/hf_t5/          T5ForConditionalGeneration: 2 encoder + 2 decoder layers, d_model
                         64, 4 heads (d_kv 16), d_ff 128, vocabulary 128, relative position
                         buckets 8; inputs input_ids, attention_mask (int64 [2, 12], one
                         sequence padded), decoder_input_ids (int64 [2, 8]); output logits
                         [2, 8, 128]
  models/hf_llama/       LlamaForCausalLM: 2 layers, hidden 64, 4 heads, 2 key/value heads
                         (grouped-query attention), intermediate 128 (SwiGLU), vocabulary 128,
                         64 positions, rotary embeddings, RMSNorm, causal mask, no KV cache;
                         input input_ids (int64 [2, 16]); output logits [2, 16, 128]
  models/hf_vit/         ViTForImageClassification: 2 layers, hidden 64, 4 heads,
                         intermediate 128, image 32, patch 8, 3 channels, 10 labels; input
                         pixel_values (float32 [2, 3, 32, 32]); output logits [2, 10]
  models/hf_whisper_enc/ WhisperModel's encoder (WhisperEncoder): 2 layers, d_model 64, 4
                         heads, FFN 128, 16 mel bins, 16 source positions (32 frames); input
                         input_features (float32 [2, 16, 32]); output last_hidden_state
                         [2, 16, 64]

Random weights (torch.manual_seed(0) before each model), eval mode, eager attention, no
dropout, opset 17, constant folding off (as make_hf_exports.py). Each folder has the
conformance layout: model.onnx and test_data_set_0/ (seeded inputs, and the outputs
onnxruntime computes on the CPU in FP32).

Needs torch and transformers (torch 2.4.1, transformers 4.44.2):
  /work/.venv-torch/bin/python models/make_llm_exports.py [ROOT] [--only NAME]
The results are committed; nothing else needs torch.
"""
import argparse
import io
import os
import shutil

import numpy as np

OPSET = 17


def export(model, args, input_names, output_name, out_dir, opset=OPSET):
    import onnx
    import onnxruntime as ort
    import torch
    from onnx import numpy_helper
    f = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(model, tuple(torch.from_numpy(a) for a in args), f, input_names=input_names,
                          output_names=[output_name], opset_version=opset, do_constant_folding=False)
    m = onnx.load_from_string(f.getvalue())
    m.producer_name = "pytorch " + torch.__version__.split("+")[0] + " via ampc models/make_llm_exports.py"
    if os.path.isdir(out_dir):
        shutil.rmtree(out_dir)
    data = os.path.join(out_dir, "test_data_set_0")
    os.makedirs(data)
    onnx.save(m, os.path.join(out_dir, "model.onnx"))
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    s = ort.InferenceSession(os.path.join(out_dir, "model.onnx"), so, providers=["CPUExecutionProvider"])
    feeds = dict(zip(input_names, args))
    outs = s.run(None, feeds)
    with torch.no_grad():
        ref = model(*(torch.from_numpy(a) for a in args)).numpy()
    err = float(np.max(np.abs(outs[0] - ref)) / max(float(np.max(np.abs(ref))), 1e-30))
    assert err < 1e-4, f"{out_dir}: onnxruntime and torch differ by {err}"
    for k, (n, a) in enumerate(feeds.items()):
        with open(os.path.join(data, f"input_{k}.pb"), "wb") as fh:
            fh.write(numpy_helper.from_array(a, n).SerializeToString())
    for k, (o, a) in enumerate(zip(s.get_outputs(), outs)):
        with open(os.path.join(data, f"output_{k}.pb"), "wb") as fh:
            fh.write(numpy_helper.from_array(a, o.name).SerializeToString())
    size = os.path.getsize(os.path.join(out_dir, "model.onnx"))
    print(f"{out_dir}: {len(m.graph.node)} nodes, {size / 1024:.0f} KiB, "
          f"output {list(outs[0].shape)}, onnxruntime vs torch {err:.1e}")


class Wrap:
    """A module returning one field of a transformers model's output."""

    @staticmethod
    def make(m, field, fn):
        import torch

        class W(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = m

            def forward(self, *a):
                return getattr(fn(self.m, *a), field)
        return W().eval()


def t5(root):
    import torch
    import transformers
    torch.manual_seed(0)
    cfg = transformers.T5Config(vocab_size=128, d_model=64, d_kv=16, d_ff=128, num_layers=2,
                                num_decoder_layers=2, num_heads=4, relative_attention_num_buckets=8,
                                relative_attention_max_distance=16, dropout_rate=0.0,
                                feed_forward_proj="relu", decoder_start_token_id=0, pad_token_id=0,
                                use_cache=False, attn_implementation="eager")
    model = transformers.T5ForConditionalGeneration(cfg).eval()
    rng = np.random.RandomState(5)
    ids = rng.randint(1, 128, size=(2, 12)).astype(np.int64)
    mask = np.ones((2, 12), np.int64)
    mask[1, 8:] = 0
    ids[1, 8:] = 0
    dec = rng.randint(1, 128, size=(2, 8)).astype(np.int64)
    dec[:, 0] = 0
    w = Wrap.make(model, "logits", lambda m, i, a, d: m(input_ids=i, attention_mask=a, decoder_input_ids=d,
                                                         use_cache=False))
    export(w, (ids, mask, dec), ["input_ids", "attention_mask", "decoder_input_ids"], "logits",
           os.path.join(root, "hf_t5"))


def llama(root):
    import torch
    import transformers
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                   hidden_act="silu", rms_norm_eps=1e-6, use_cache=False, attention_dropout=0.0,
                                   tie_word_embeddings=False, attn_implementation="eager")
    model = transformers.LlamaForCausalLM(cfg).eval()
    ids = np.random.RandomState(6).randint(0, 128, size=(2, 16)).astype(np.int64)
    w = Wrap.make(model, "logits", lambda m, i: m(input_ids=i, use_cache=False))
    export(w, (ids,), ["input_ids"], "logits", os.path.join(root, "hf_llama"))


def vit(root):
    import torch
    import transformers
    torch.manual_seed(0)
    cfg = transformers.ViTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                                 image_size=32, patch_size=8, num_channels=3, num_labels=10,
                                 hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                 attn_implementation="eager")
    model = transformers.ViTForImageClassification(cfg).eval()
    px = np.random.RandomState(7).standard_normal((2, 3, 32, 32)).astype(np.float32)
    w = Wrap.make(model, "logits", lambda m, p: m(pixel_values=p))
    export(w, (px,), ["pixel_values"], "logits", os.path.join(root, "hf_vit"))


def whisper_enc(root):
    import torch
    import transformers
    torch.manual_seed(0)
    cfg = transformers.WhisperConfig(vocab_size=128, num_mel_bins=16, d_model=64, encoder_layers=2,
                                     encoder_attention_heads=4, encoder_ffn_dim=128, decoder_layers=1,
                                     decoder_attention_heads=4, decoder_ffn_dim=128, max_source_positions=16,
                                     max_target_positions=16, dropout=0.0, attention_dropout=0.0,
                                     activation_dropout=0.0, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                                     decoder_start_token_id=1, use_cache=False, attn_implementation="eager")
    enc = transformers.WhisperModel(cfg).eval().get_encoder()
    feats = np.random.RandomState(8).standard_normal((2, 16, 32)).astype(np.float32)
    w = Wrap.make(enc, "last_hidden_state", lambda m, x: m(input_features=x))
    export(w, (feats,), ["input_features"], "last_hidden_state", os.path.join(root, "hf_whisper_enc"))


MODELS = {"hf_t5": t5, "hf_llama": llama, "hf_vit": vit, "hf_whisper_enc": whisper_enc}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", nargs="?", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--only", action="append", choices=sorted(MODELS), help="write only this model (repeatable)")
    args = ap.parse_args()
    for name, fn in MODELS.items():
        if not args.only or name in args.only:
            fn(args.root)


if __name__ == "__main__":
    main()
