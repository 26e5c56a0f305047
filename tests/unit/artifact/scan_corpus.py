#!/usr/bin/python3
"""Build the safety scanner's corpus with Debian's python3-torch, python3-numpy and
python3-onnx into DIR/clean (files that must scan clean) and DIR/unsafe (files that must
scan unsafe). Nothing here is ever loaded: the malicious objects' __reduce__ methods only
return a (callable, args) pair while pickling; os.system is never called.

  clean/   torch.save state dicts and checkpoints (zip, legacy, protocols 2 and 4, several
           dtypes, Parameters, nested dicts, optimizer state), np.save / np.savez /
           np.savez_compressed (numbers and object arrays of plain values), plain pickles
           of protocols 0-5, GGUF with a ChatML template, an ONNX model with relative
           external data, a Keras config.json without Lambda, and tar / tar.gz / zip
           archives of these, nested too
  unsafe/  the same containers holding objects whose __reduce__ calls os.system,
           subprocess.Popen, eval or exec; a whole nn.Module pickled; a GGUF with an SSTI
           template; ONNX external data leaving the model's directory; a Keras Lambda

Usage: scan_corpus.py DIR
"""
import collections
import io
import os
import pickle
import struct
import subprocess
import sys
import tarfile
import zipfile

import numpy as np
import torch


class SystemCall:
    def __reduce__(self):
        return (os.system, ('echo pwned',))


class PopenCall:
    def __reduce__(self):
        return (subprocess.Popen, (['id'],))


class EvalCall:
    def __reduce__(self):
        return (eval, ("__import__('os').system('id')",))


class ExecCall:
    def __reduce__(self):
        return (exec, ("import os; os.system('id')",))


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'wb') as f:
        f.write(data)


def tsave(obj, **kw):
    buf = io.BytesIO()
    torch.save(obj, buf, **kw)
    return buf.getvalue()


def npsave(arr):
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=True)
    return buf.getvalue()


def npz(compressed=False, **arrays):
    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buf, **arrays)
    return buf.getvalue()


def tar(members, mode='w'):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as t:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def zipped(members, method=zipfile.ZIP_DEFLATED):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, 'w', method) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


def gguf(template):
    def s(x):
        b = x.encode()
        return struct.pack('<Q', len(b)) + b
    kv = [(b'general.architecture', 8, s('llama')), (b'general.name', 8, s('corpus'))]
    if template is not None:
        kv.append((b'tokenizer.chat_template', 8, s(template)))
    out = b'GGUF' + struct.pack('<IQQ', 3, 0, len(kv))
    for k, t, v in kv:
        out += struct.pack('<Q', len(k)) + k + struct.pack('<I', t) + v
    return out


def onnx_external(location):
    import onnx
    from onnx import TensorProto, helper
    t = helper.make_tensor('W', TensorProto.FLOAT, [4], [0.0] * 4)
    t.ClearField('float_data')
    t.data_location = TensorProto.EXTERNAL
    e = t.external_data.add()
    e.key = 'location'
    e.value = location
    graph = helper.make_graph([helper.make_node('Identity', ['W'], ['y'])], 'g', [],
                              [helper.make_tensor_value_info('y', TensorProto.FLOAT, [4])], [t])
    return helper.make_model(graph).SerializeToString()


def keras_config(lambda_layer):
    layers = [{'module': 'keras.layers', 'class_name': 'InputLayer',
               'config': {'batch_shape': [None, 4], 'name': 'input'}},
              {'module': 'keras.layers', 'class_name': 'Dense',
               'config': {'units': 2, 'activation': 'relu', 'name': 'dense'}}]
    if lambda_layer:
        layers.append({'module': 'keras.layers', 'class_name': 'Lambda',
                       'config': {'function': {'class_name': '__lambda__',
                                               'config': {'code': '4wEAAAAAAAAAAAAAAAEAAAAB'}}}})
    import json
    return json.dumps({'module': 'keras', 'class_name': 'Sequential',
                       'config': {'name': 'seq', 'layers': layers}}).encode()


def main(out):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    sd = model.state_dict()
    opt = torch.optim.Adam(model.parameters())
    model(torch.randn(3, 8)).sum().backward()
    opt.step()
    dtypes = collections.OrderedDict(
        (str(d), torch.ones(3, dtype=d)) for d in
        (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
         torch.int16, torch.int32, torch.int64, torch.bool, torch.complex64))
    ckpt = {'model': sd, 'optimizer': opt.state_dict(), 'epoch': 3, 'loss': 0.25,
            'names': ['a', 'b'], 'shape': torch.Size([2, 3]), 'device': torch.device('cpu'),
            'params': [torch.nn.Parameter(torch.zeros(2))], 'counts': collections.Counter('aab'),
            'blob': b'\x00\x01bytes', 'flags': {1, 2}, 'c': complex(1, 2)}
    clean = {
        'state_dict.pt': tsave(sd),
        'checkpoint.pt': tsave(ckpt),
        'checkpoint_p4.pt': tsave(ckpt, pickle_protocol=4),
        'legacy.pt': tsave(sd, _use_new_zipfile_serialization=False),
        'legacy_checkpoint.pth': tsave(ckpt, _use_new_zipfile_serialization=False),
        'dtypes.pt': tsave(dtypes),
        'views.bin': tsave({'a': torch.arange(10.0)[2:5], 'b': torch.arange(6).view(2, 3).t()}),
        'floats.npy': npsave(np.arange(12, dtype=np.float32).reshape(3, 4)),
        'objects.npy': npsave(np.array([1, 'two', None, 3.5, (1, 2)], dtype=object)),
        'arrays.npz': npz(a=np.zeros(4), b=np.arange(3)),
        'compressed.npz': npz(True, a=np.ones((2, 2)), o=np.array(['x', 1], dtype=object)),
        'chatml.gguf': gguf("{% for message in messages %}{{'<|im_start|>' + message['role'] + "
                            "'\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
                            "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
                            "{% endif %}"),
        'plain.gguf': gguf(None),
        'external.onnx': onnx_external('weights/W.bin'),
        'keras.zip': zipped({'config.json': keras_config(False), 'metadata.json': b'{}',
                             'model.weights.h5': b'\x89HDF\r\n\x1a\n' + bytes(64)}),
    }
    for proto in range(0, 6):
        clean['plain_p%d.pkl' % proto] = pickle.dumps(
            {'a': [1, 2.0, 'x', None, True], 'b': (1, 2), 'c': b'raw'}, protocol=proto)
    clean['model.tar'] = tar({'model/state_dict.pt': clean['state_dict.pt'],
                              'model/objects.npy': clean['objects.npy'],
                              'model/config.json': b'{"hidden_size": 8, "model_type": "x"}'})
    clean['model.tar.gz'] = tar({'pytorch_model.bin': clean['checkpoint.pt'],
                                 'tokenizer.json': b'{"version": "1.0"}'}, 'w:gz')
    clean['nested.zip'] = zipped({'inner/model.tar.gz': clean['model.tar.gz'],
                                  'inner/arrays.npz': clean['arrays.npz']})
    clean['stored.zip'] = zipped({'legacy.pt': clean['legacy.pt'], 'p5.pkl': clean['plain_p5.pkl']},
                                 zipfile.ZIP_STORED)

    evil = SystemCall()
    unsafe = {
        'evil_state_dict.pt': tsave({'w': torch.ones(2), 'x': evil}),
        'evil_checkpoint.pt': tsave(dict(ckpt, hook=PopenCall())),
        'evil_legacy.pt': tsave({'w': torch.ones(2), 'x': evil},
                                _use_new_zipfile_serialization=False),
        'evil_p4.pt': tsave({'x': EvalCall()}, pickle_protocol=4),
        'whole_module.pt': tsave(model),
        'evil_objects.npy': npsave(np.array([1, evil], dtype=object)),
        'evil.npz': npz(a=np.zeros(2), o=np.array([ExecCall()], dtype=object)),
        'ssti.gguf': gguf("{{ cycler.__init__.__globals__.os.popen('id').read() }}"),
        'escape.onnx': onnx_external('../../etc/passwd'),
        'absolute.onnx': onnx_external('/etc/shadow'),
        'keras_lambda.zip': zipped({'config.json': keras_config(True), 'metadata.json': b'{}'}),
    }
    for proto in range(0, 6):
        unsafe['evil_p%d.pkl' % proto] = pickle.dumps({'a': 1, 'x': evil}, protocol=proto)
        unsafe['popen_p%d.pickle' % proto] = pickle.dumps([PopenCall()], protocol=proto)
    unsafe['evil.tar'] = tar({'model/evil.pt': unsafe['evil_state_dict.pt'],
                              'model/clean.pt': clean['state_dict.pt']})
    unsafe['evil.tar.gz'] = tar({'pytorch_model.bin': unsafe['evil_checkpoint.pt']}, 'w:gz')
    unsafe['evil_nested.zip'] = zipped({'a/b.tar.gz': unsafe['evil.tar.gz']})
    unsafe['evil_npz_in_tar.tar'] = tar({'data/arrays.npz': unsafe['evil.npz']})

    for name, data in clean.items():
        write(os.path.join(out, 'clean', name), data)
    for name, data in unsafe.items():
        write(os.path.join(out, 'unsafe', name), data)


if __name__ == '__main__':
    main(sys.argv[1])
