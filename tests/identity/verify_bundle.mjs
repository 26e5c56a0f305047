// verify_bundle.mjs - verify a modelgate Sigstore bundle (a version's or an alias
// generation's attestation) with sigstore-js (@sigstore/verify), offline, against a public
// key given as PEM: no transparency log, no certificate, the key named by its hint.
//
// Usage: node verify_bundle.mjs BUNDLE.json PUBLIC_KEY.pem   (exit 0: verified)
import fs from 'node:fs';
import crypto from 'node:crypto';
import { bundleFromJSON } from '@sigstore/bundle';
import { TrustedRoot } from '@sigstore/protobuf-specs';
import { Verifier, toSignedEntity, toTrustMaterial } from '@sigstore/verify';

const [bundlePath, keyPath] = process.argv.slice(2);
const json = JSON.parse(fs.readFileSync(bundlePath, 'utf8'));
const bundle = bundleFromJSON(json);
const pem = fs.readFileSync(keyPath);
const publicKey = crypto.createPublicKey(pem);
// modelgate's hint is the SHA-256 of the key's PEM text (GET /api/v1/signing-keys): the
// key given answers to that hint only.
const ownHint = crypto.createHash('sha256').update(pem).digest('hex');
const keys = (h) => {
  if (h !== ownHint) throw new Error(`the bundle names key ${h}, not the one given`);
  return { publicKey, validFor: () => true };
};
const root = TrustedRoot.fromJSON({
  mediaType: 'application/vnd.dev.sigstore.trustedroot+json;version=0.1',
  tlogs: [], certificateAuthorities: [], ctlogs: [], timestampAuthorities: [],
});
const verifier = new Verifier(toTrustMaterial(root, keys), {
  tlogThreshold: 0, ctlogThreshold: 0, tsaThreshold: 0,
});
try {
  verifier.verify(toSignedEntity(bundle));
  console.log('verified');
} catch (e) {
  console.error(`not verified: ${e.message}`);
  process.exit(1);
}
