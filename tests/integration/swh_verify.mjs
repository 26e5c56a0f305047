// The official Standard Webhooks library (npm `standardwebhooks`) as a verifier for the C
// webhook receiver of the push tests (webhook_rx.h): one JSON line in per delivery,
// {"secret","id","timestamp","signature","body"}, one line out: "ok" or "bad <reason>".
// A `whsec_` secret is given to the library as it is; any other secret as raw bytes
// ({format: "raw"}), which is how a receiver configured with a raw secret uses it.
import { createRequire } from 'node:module';
import path from 'node:path';
import readline from 'node:readline';

const src = process.env.MG_SOURCE_DIR;
if (!src) {
  console.error('swh_verify: MG_SOURCE_DIR is not set');
  process.exit(2);
}
const require = createRequire(path.join(src, 'tests', 'ui', 'package.json'));
const { Webhook } = require('standardwebhooks');

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
process.stdout.write('ready\n');
rl.on('line', (line) => {
  let answer;
  try {
    const d = JSON.parse(line);
    const wh = d.secret.startsWith('whsec_') ? new Webhook(d.secret)
                                             : new Webhook(d.secret, { format: 'raw' });
    wh.verify(d.body, {
      'webhook-id': d.id,
      'webhook-timestamp': d.timestamp,
      'webhook-signature': d.signature,
    }, { jsonParse: false });
    answer = 'ok';
  } catch (e) {
    answer = 'bad ' + String(e && e.message ? e.message : e).replace(/\s+/g, ' ');
  }
  process.stdout.write(answer + '\n');
});
