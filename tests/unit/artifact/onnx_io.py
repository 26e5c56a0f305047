#!/usr/bin/python3
"""Dump what python3-onnx reads from ONNX models: graph inputs and outputs (name, dtype,
shape, optional), initializer count, parameters and dtypes, and the opset, as one JSON object
{path: {...}} on stdout. tests/unit/artifact/test_introspect.c compares modelgate's reader
(artifact/onnx.c) with it, file by file.

Usage: onnx_io.py DIR_OR_FILE...   (directories are searched for *.onnx)

Names follow modelgate's canonical dtype spelling (docs/contract.md): F32, I64, ..., and
seq(T), map(K,V), optional(T), sparse(T) for the other value types.
"""
import json
import os
import sys

import onnx

DTYPES = {1: 'F32', 2: 'U8', 3: 'I8', 4: 'U16', 5: 'I16', 6: 'I32', 7: 'I64', 8: 'STRING',
          9: 'BOOL', 10: 'F16', 11: 'F64', 12: 'U32', 13: 'U64', 14: 'C64', 15: 'C128',
          16: 'BF16', 17: 'F8_E4M3', 18: 'F8_E4M3FNUZ', 19: 'F8_E5M2', 20: 'F8_E5M2FNUZ',
          21: 'U4', 22: 'I4', 23: 'F4'}


def elem(t):
    return DTYPES.get(t, 'UNDEFINED')


def type_text(t):
    kind = t.WhichOneof('value')
    if kind == 'tensor_type':
        return elem(t.tensor_type.elem_type)
    if kind == 'sparse_tensor_type':
        return 'sparse(%s)' % elem(t.sparse_tensor_type.elem_type)
    if kind == 'sequence_type':
        inner = t.sequence_type
        return 'seq(%s)' % (type_text(inner.elem_type) if inner.HasField('elem_type') else 'UNDEFINED')
    if kind == 'optional_type':
        inner = t.optional_type
        return 'optional(%s)' % (type_text(inner.elem_type) if inner.HasField('elem_type') else 'UNDEFINED')
    if kind == 'map_type':
        m = t.map_type
        return 'map(%s,%s)' % (elem(m.key_type),
                               type_text(m.value_type) if m.HasField('value_type') else 'UNDEFINED')
    return 'UNDEFINED'


def shape(t):
    kind = t.WhichOneof('value')
    if kind not in ('tensor_type', 'sparse_tensor_type'):
        return None
    tt = getattr(t, kind)
    if not tt.HasField('shape'):
        return None
    out = []
    for d in tt.shape.dim:
        if d.HasField('dim_value'):
            out.append(d.dim_value)
        elif d.HasField('dim_param'):
            out.append(d.dim_param)
        else:
            out.append(-1)
    return out


def value_info(v, inits, is_input):
    e = {'name': v.name, 'dtype': type_text(v.type) if v.HasField('type') else 'UNDEFINED',
         'shape': shape(v.type) if v.HasField('type') else None}
    if is_input and (v.name in inits or (v.HasField('type') and v.type.WhichOneof('value') == 'optional_type')):
        e['optional'] = True
    return e


def count(t, params, dtypes):
    n = 1
    for d in t.dims:
        n *= d
    params[0] += n
    name = elem(t.data_type)
    dtypes[name] = dtypes.get(name, 0) + n


def dump(path):
    m = onnx.load(path, load_external_data=False)
    g = m.graph
    inits = set(i.name for i in g.initializer)
    params, dtypes = [0], {}
    for t in g.initializer:
        count(t, params, dtypes)
    for s in g.sparse_initializer:
        if s.HasField('values'):
            count(s.values, params, dtypes)
    out = {'inputs': [value_info(v, inits, True) for v in g.input],
           'outputs': [value_info(v, inits, False) for v in g.output],
           'tensors': len(g.initializer) + sum(1 for s in g.sparse_initializer if s.HasField('values')),
           'parameters': params[0], 'dtypes': dtypes}
    for o in m.opset_import:
        if o.domain in ('', 'ai.onnx'):
            out['opset'] = o.version
    if m.producer_name:
        out['producer_name'] = m.producer_name
    return out


def main():
    files = []
    for arg in sys.argv[1:]:
        if os.path.isdir(arg):
            for root, _, names in os.walk(arg):
                files += [os.path.join(root, n) for n in names if n.endswith('.onnx')]
        else:
            files.append(arg)
    json.dump({f: dump(f) for f in sorted(files)}, sys.stdout, sort_keys=True)


if __name__ == '__main__':
    main()
