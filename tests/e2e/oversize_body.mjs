// Sends JSON bodies over --max-json-bytes with Node's own HTTP clients (no Expect:
// 100-continue, so the whole body is on its way when the server decides) and counts how
// many 413s arrive. Usage: node oversize_body.mjs URL TOKEN BYTES ROUNDS
// Prints one line per client, "http: 40/40 413" and exits 1 unless every reply was a 413
// with the payload_too_large error body.
import http from 'node:http';

const [url, token, bytesArg, roundsArg] = process.argv.slice(2);
const bytes = Number(bytesArg);
const rounds = Number(roundsArg);
const body = '{"name":"' + 'x'.repeat(bytes) + '"}';
const target = new URL('/api/v1/models', url);

function viaHttp() {
    return new Promise((resolve) => {
        const req = http.request(target, {
            method: 'POST',
            headers: {
                'Authorization': `Bearer ${token}`,
                'Content-Type': 'application/json',
                'Content-Length': Buffer.byteLength(body),
            },
        }, (res) => {
            let text = '';
            res.setEncoding('utf8');
            res.on('data', (c) => { text += c; });
            res.on('end', () => resolve({ status: res.statusCode, text }));
            res.on('error', (e) => resolve({ status: 0, text: String(e) }));
        });
        req.on('error', (e) => resolve({ status: 0, text: String(e) }));
        req.end(body);
    });
}

async function viaFetch() {
    try {
        const res = await fetch(target, {
            method: 'POST',
            headers: { 'Authorization': `Bearer ${token}`, 'Content-Type': 'application/json' },
            body,
        });
        return { status: res.status, text: await res.text() };
    } catch (e) {
        return { status: 0, text: String(e.cause ?? e) };
    }
}

function good(r) {
    if (r.status !== 413)
        return false;
    try {
        return JSON.parse(r.text).error.code === 'payload_too_large';
    } catch {
        return false;
    }
}

let failed = 0;
for (const [name, fn] of [['http', viaHttp], ['fetch', viaFetch]]) {
    let ok = 0;
    const seen = new Map();
    for (let i = 0; i < rounds; i++) {
        const r = await fn();
        if (good(r))
            ok++;
        else
            seen.set(`${r.status} ${r.text.slice(0, 80)}`, (seen.get(`${r.status} ${r.text.slice(0, 80)}`) ?? 0) + 1);
    }
    console.log(`${name}: ${ok}/${rounds} 413`);
    for (const [k, v] of seen)
        console.log(`  ${v}x ${k}`);
    if (ok !== rounds)
        failed++;
}
process.exit(failed ? 1 : 0);
