#!/usr/bin/python3
"""Build the ONNX models the tests read, with Debian's python3-onnx, into DIR:

  vision.onnx   inputs image F32 [batch,3,224,224] and mask I64 [?,8] (a dimension with
                neither value nor name), output logits F32 [batch,1000]; initializers
                W F32 [64,3,7,7] (raw_data), B F16 [64], E I64 [10] (int64_data)
  big.onnx      one F32 initializer of 4 Mi elements in raw_data (16 MiB): the reader must
                skip it, not keep it
  renamed.onnx  vision.onnx with its input "image" renamed "pixels"
  extra.onnx    vision.onnx with an extra output "probs" F32 [batch,1000] and an extra
                optional input "temperature" F32 [1] (it has an initializer)
  seq.onnx      a sequence input seq(F32) and a map-free optional output optional(F32)

Usage: onnx_make.py DIR
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def vision(image='image', extra=False):
    inputs = [helper.make_tensor_value_info(image, TensorProto.FLOAT, ['batch', 3, 224, 224]),
              helper.make_tensor_value_info('mask', TensorProto.INT64, [None, 8])]
    outputs = [helper.make_tensor_value_info('logits', TensorProto.FLOAT, ['batch', 1000])]
    inits = [numpy_helper.from_array(np.ones((64, 3, 7, 7), dtype=np.float32), 'W'),
             numpy_helper.from_array(np.ones((64,), dtype=np.float16), 'B'),
             helper.make_tensor('E', TensorProto.INT64, [10], list(range(10)))]
    nodes = [helper.make_node('Identity', [image], ['logits_pre']),
             helper.make_node('Flatten', ['logits_pre'], ['logits'])]
    if extra:
        inputs.append(helper.make_tensor_value_info('temperature', TensorProto.FLOAT, [1]))
        inits.append(numpy_helper.from_array(np.ones((1,), dtype=np.float32), 'temperature'))
        outputs.append(helper.make_tensor_value_info('probs', TensorProto.FLOAT, ['batch', 1000]))
        nodes.append(helper.make_node('Softmax', ['logits'], ['probs']))
    g = helper.make_graph(nodes, 'vision', inputs, outputs, inits)
    return helper.make_model(g, producer_name='modelgate-tests', opset_imports=[helper.make_opsetid('', 13)])


def big():
    w = numpy_helper.from_array(np.zeros((4 << 20,), dtype=np.float32), 'W')
    g = helper.make_graph([helper.make_node('Identity', ['x'], ['y'])], 'big',
                          [helper.make_tensor_value_info('x', TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info('y', TensorProto.FLOAT, [1])], [w])
    return helper.make_model(g, producer_name='modelgate-tests', opset_imports=[helper.make_opsetid('', 13)])


def seq():
    s = helper.make_tensor_sequence_value_info('frames', TensorProto.FLOAT, ['n', 4])
    o = helper.make_value_info('maybe', helper.make_optional_type_proto(
        helper.make_tensor_type_proto(TensorProto.FLOAT, [2])))
    g = helper.make_graph([helper.make_node('Optional', [], ['maybe'])], 'seq', [s], [o])
    return helper.make_model(g, producer_name='modelgate-tests', opset_imports=[helper.make_opsetid('', 15)])


def main():
    out = sys.argv[1]
    models = {'vision': vision(), 'big': big(), 'renamed': vision(image='pixels'),
              'extra': vision(extra=True), 'seq': seq()}
    for name, m in models.items():
        onnx.save(m, '%s/%s.onnx' % (out, name))


if __name__ == '__main__':
    main()
