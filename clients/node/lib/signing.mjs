// Signed Documents as the Python SDK makes them (mwp/core/trust/signed_document.py): the
// RFC 8785 (JCS) bytes of the document without its top-level `signature`, signed with
// Ed25519, and an envelope {algorithm, keyId, createdAt, value} whose createdAt copies the
// document's protected time byte for byte.

import { createHash, createPrivateKey, createPublicKey, randomUUID, sign } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';

import canonicalize from 'canonicalize';

export const PROTOCOL_VERSION = '0.1';
const KEY_FILE_FORMAT = 'mwp-signing-identity/1';

/** The JCS bytes of a JSON value. */
export function jcs(value) {
  return Buffer.from(canonicalize(value), 'utf8');
}

export function sha256Ref(bytes) {
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
}

export function newId() {
  return `urn:uuid:${randomUUID()}`;
}

/** Now as a protocol timestamp: whole seconds, UTC, `Z` (as the Python SDK's utc_now). */
export function utcNow() {
  return new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/**
 * An Agent's signing identity from a key file of the project's format (`mwp keys`,
 * `Identity.save`): refused when others may read it, or when its seed does not give its
 * public key.
 */
export function loadIdentity(path) {
  if (statSync(path).mode & 0o077) {
    throw new Error(`${path} is readable by others; run: chmod 600 ${path}`);
  }
  const file = JSON.parse(readFileSync(path, 'utf8'));
  if (file.format !== KEY_FILE_FORMAT) {
    throw new Error(`${path} is not an MWP signing identity file`);
  }
  const privateKey = createPrivateKey({
    format: 'jwk',
    key: { kty: 'OKP', crv: 'Ed25519', d: file.seed, x: file.publicKey },
  });
  const derived = createPublicKey(privateKey).export({ format: 'jwk' }).x;
  if (derived !== file.publicKey) {
    throw new Error(`${path}: the seed does not match the public key`);
  }
  return { principal: file.principal, keyId: file.keyId, privateKey };
}

/** Ed25519 over exact bytes, as base64url without padding. */
export function signBytes(identity, bytes) {
  return sign(null, bytes, identity.privateKey).toString('base64url');
}

/** `document` with a fresh signature envelope; `timeMember` names its protected time. */
export function signDocument(identity, document, timeMember) {
  const { signature: _old, ...unsigned } = document;
  const createdAt = unsigned[timeMember];
  if (typeof createdAt !== 'string' || !createdAt.endsWith('Z')) {
    throw new Error(`${timeMember} must be a UTC timestamp ending in Z`);
  }
  const value = signBytes(identity, jcs(unsigned));
  return {
    ...unsigned,
    signature: { algorithm: 'Ed25519', keyId: identity.keyId, createdAt, value },
  };
}

/**
 * A signed Command (command.schema.json) by `identity`; envelope members that are
 * undefined are omitted, never invented (as `Identity.command` in the Python SDK).
 */
export function signCommand(identity, kind, payload, envelope = {}) {
  const command = {
    protocolVersion: PROTOCOL_VERSION,
    actionId: newId(),
    actor: identity.principal,
    kind,
    correlationId: newId(),
    issuedAt: utcNow(),
    payload,
  };
  for (const [member, value] of Object.entries(envelope)) {
    if (value !== undefined && value !== null) command[member] = value;
  }
  return signDocument(identity, command, 'issuedAt');
}

/** A copy of a signed document whose signature no longer verifies (one bit of S flipped). */
export function tampered(document) {
  const signature = Buffer.from(document.signature.value, 'base64url');
  signature[32] ^= 0x01; // S's lowest bit: still a strictly encoded signature, a wrong one
  return {
    ...document,
    signature: { ...document.signature, value: signature.toString('base64url') },
  };
}
