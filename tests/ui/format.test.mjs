// The UI's number formats (web/ui_format.js), without a browser: a recorded value (a
// metric, a threshold, a gate's observation) is shown as the shortest text that reads back
// as the same number, so two different values never look equal; derived figures stay short.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fmtApprox, fmtDelta, fmtExact, fmtNum } from '../../web/ui_format.js';

test('recorded values are shown exactly, in their shortest text', () => {
  for (const [x, text] of [[0.942, '0.942'], [0.94212, '0.94212'], [0.94213, '0.94213'],
                           [0.1 + 0.2, '0.30000000000000004'], [41.5, '41.5'], [3, '3'],
                           [1234567.89, '1234567.89'], [-0.000125, '-0.000125']]) {
    assert.equal(fmtExact(x), text);
    assert.equal(Number(fmtExact(x)), x);
  }
  assert.notEqual(fmtExact(0.94212), fmtExact(0.94213));
  assert.equal(fmtExact(null), '—');
  assert.equal(fmtExact(undefined), '—');
});

test('derived figures stay short', () => {
  assert.equal(fmtApprox(0.020000000000000018), '0.02');
  assert.equal(fmtApprox(12345.678), '12345.7');
  assert.equal(fmtDelta(0.95 - 0.942), '+0.008');
  assert.equal(fmtDelta(-(0.3 - 0.1)), '−0.2');
});

test('a number the server sent is shown as sent', () => {
  assert.equal(fmtNum(0.94212), '0.94212');
  assert.equal(fmtNum(3), '3');
  assert.equal(fmtNum(null), '—');
});
