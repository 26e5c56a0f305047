// A deliberately broken modelgated for the CLI's fail-closed test: every request is answered
// with the status in DIR/status and the bytes in DIR/body (rewritten by the test between
// calls); /api/v1/whoami answers a valid identity so the CLI gets as far as the command.
// Prints the port it listens on, then serves until killed.
import http from 'node:http';
import { readFileSync } from 'node:fs';

const dir = process.argv[2];
const server = http.createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    if (req.url.startsWith('/api/v1/whoami')) {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end('{"id":"tok_1","name":"ci","roles":["admin"],"teams":[],"aliases":[]}');
      return;
    }
    const status = Number(readFileSync(`${dir}/status`, 'utf8').trim() || '200');
    res.writeHead(status, { 'Content-Type': 'application/json' });
    res.end(readFileSync(`${dir}/body`));
  });
});
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
