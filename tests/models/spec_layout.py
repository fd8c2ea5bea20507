"""ONNX's own training layout (onnx.proto, TrainingInfoProto): the main graph is the
inference graph; the loss, the backward and the optimizer live in
training_info[0].algorithm, whose update_bindings write the new weights and state.

to_spec_layout(flat, keep) moves a training model in the flat layout (the loss and
backward in the main graph, as `ampc grad` and onnxruntime-training write them) into that
layout: the main graph keeps the nodes its `keep` outputs need; every other node, graph
input, output and initializer only those nodes read goes to the algorithm graph, ahead of
the algorithm's own nodes. The two models describe the same training step."""
import copy

import onnx


def _needed(nodes, outputs):
    """The nodes (indices) that the values `outputs` depend on."""
    producer = {}
    for i, n in enumerate(nodes):
        for o in n.output:
            if o:
                producer[o] = i
    seen, stack = set(), [producer[o] for o in outputs if o in producer]
    while stack:
        i = stack.pop()
        if i in seen:
            continue
        seen.add(i)
        for x in nodes[i].input:
            if x in producer and producer[x] not in seen:
                stack.append(producer[x])
    return seen


def to_spec_layout(flat, keep, move_state=True):
    """flat: onnx.ModelProto with one training_info. keep: the main graph's outputs that stay
    (the inference outputs). move_state: initializers read only by the algorithm (optimizer
    state, constants of the backward) become the algorithm's own initializers."""
    m = copy.deepcopy(flat)
    g = m.graph
    assert len(m.training_info) == 1, "one training_info expected"
    alg = m.training_info[0].algorithm
    nodes = list(g.node)
    main_idx = _needed(nodes, keep)
    main_nodes = [n for i, n in enumerate(nodes) if i in main_idx]
    moved = [n for i, n in enumerate(nodes) if i not in main_idx]
    main_reads = {x for n in main_nodes for x in n.input} | set(keep)
    moved_outputs = [o for o in g.output if o.name not in keep]
    kept_outputs = [o for o in g.output if o.name in keep]
    moved_inputs = [i for i in g.input if i.name not in main_reads]
    kept_inputs = [i for i in g.input if i.name in main_reads]
    new_alg_nodes = moved + list(alg.node)
    del g.node[:]
    g.node.extend(main_nodes)
    del g.output[:]
    g.output.extend(kept_outputs)
    del g.input[:]
    g.input.extend(kept_inputs)
    del alg.node[:]
    alg.node.extend(new_alg_nodes)
    alg_inputs = list(moved_inputs) + list(alg.input)
    del alg.input[:]
    alg.input.extend(alg_inputs)
    alg_outputs = list(moved_outputs) + list(alg.output)
    del alg.output[:]
    alg.output.extend(alg_outputs)
    if move_state:
        bound_main = set()
        stay = [t for t in g.initializer if t.name in main_reads]
        go = [t for t in g.initializer if t.name not in main_reads]
        del g.initializer[:]
        g.initializer.extend(stay)
        alg.initializer.extend(go)
        del bound_main
    # value_info of moved values follows them
    alg_values = {o for n in moved for o in n.output}
    vi_main = [v for v in g.value_info if v.name not in alg_values]
    vi_alg = [v for v in g.value_info if v.name in alg_values]
    del g.value_info[:]
    g.value_info.extend(vi_main)
    alg.value_info.extend(vi_alg)
    return m


def main_outputs_of(model):
    return [o.name for o in model.graph.output]


if __name__ == "__main__":
    import sys
    src, dst, *keep = sys.argv[1:]
    out = to_spec_layout(onnx.load(src), keep)
    onnx.save(out, dst)
