// The S3 server of the blob backend tests: @20minutes/s3rver (a maintained s3rver fork that
// verifies SigV4 signatures, header and presigned) on 127.0.0.1, port 0 or argv[3], data in
// argv[2], bucket "mgtest", credentials S3RVER:S3RVER. It prints {"port":N} once listening.
//
// s3rver has no ListMultipartUploads or AbortMultipartUpload; both are added here over its
// filesystem store (<dir>/<bucket>/._S3rver_uploads/<id>/{key,N,…}), behind its own
// authentication, so the tests can check that aborted and killed uploads are found and
// cleaned up as they would be on S3.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const S3rver = require('@20minutes/s3rver');
const router = require('@20minutes/s3rver/lib/routes');

const dir = process.argv[2];
const port = Number(process.argv[3] || 0);

function uploadsDir(bucket) {
  return path.join(dir, bucket, '._S3rver_uploads');
}

function esc(s) {
  return String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

async function listUploads(ctx, next) {
  if (!('uploads' in ctx.query)) return next();
  const bucket = ctx.params.bucket;
  const prefix = ctx.query.prefix || '';
  const root = uploadsDir(bucket);
  let items = '';
  for (const id of fs.existsSync(root) ? fs.readdirSync(root) : []) {
    const keyFile = path.join(root, id, 'key');
    if (!fs.existsSync(keyFile)) continue;
    const key = fs.readFileSync(keyFile, 'utf8');
    if (!key.startsWith(prefix)) continue;
    const when = fs.statSync(keyFile).mtime.toISOString();
    items += `<Upload><Key>${esc(key)}</Key><UploadId>${id}</UploadId><Initiated>${when}</Initiated></Upload>`;
  }
  ctx.type = 'application/xml';
  ctx.body = `<?xml version="1.0" encoding="UTF-8"?>\n<ListMultipartUploadsResult><Bucket>${esc(bucket)}</Bucket><Prefix>${esc(prefix)}</Prefix><IsTruncated>false</IsTruncated>${items}</ListMultipartUploadsResult>`;
}

async function abortUpload(ctx, next) {
  if (!('uploadId' in ctx.query)) return next();
  const id = String(ctx.query.uploadId);
  const up = path.join(uploadsDir(ctx.params.bucket), id);
  if (!/^[0-9a-f]+$/.test(id) || !fs.existsSync(up)) {
    ctx.status = 404;
    ctx.type = 'application/xml';
    ctx.body = '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>NoSuchUpload</Code><Message>The specified multipart upload does not exist.</Message></Error>';
    return;
  }
  fs.rmSync(up, { recursive: true, force: true });
  ctx.status = 204;
}

// Mount both right after s3rver's own authentication (and before its routes, which answer
// these requests with NotImplemented / MethodNotAllowed).
const before = router.stack.length;
router.get('/:bucket', listUploads);
router.delete('/:bucket/*key', abortUpload);
const added = router.stack.splice(before);
const auth = router.stack.findIndex((l) => l.stack.some((f) => f.name === 'authentication'));
if (auth < 0) throw new Error('s3rver changed: no authentication layer in its router');
router.stack.splice(auth + 1, 0, ...added);

const server = new S3rver({
  directory: dir,
  address: '127.0.0.1',
  port,
  silent: true,
  vhostBuckets: false,
  configureBuckets: [{ name: 'mgtest' }],
});
server.run().then(
  (addr) => console.log(JSON.stringify({ port: addr.port })),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
