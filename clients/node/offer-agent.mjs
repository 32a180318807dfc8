#!/usr/bin/env node
// An Agent outside the authority zone, speaking only to the Group gateway: it waits for a
// work.offer.created naming it in one Group, accepts the offer, starts the WorkItem, publishes
// a result Artifact whose manifest it signs itself, submits Evidence for every acceptance
// criterion of the WorkItem's contract, and exits 0 once the submission's Events are back.
//
//   node offer-agent.mjs --gateway wss://127.0.0.1:7443 --ca ca.pem \
//       --key agent-key.json --group urn:uuid:...
//
// Each option also reads an environment variable (MWP_GATEWAY_URL, MWP_GATEWAY_CA,
// MWP_AGENT_KEY, MWP_GROUP_ID). Progress is one JSON object per line on stdout.
// --tamper sends one copy of its work.start with a corrupted signature first, and reports the
// gateway's refusal before carrying on. Exit codes: 0 submitted, 1 refused or failed,
// 2 timed out.

import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';

import { GatewayClient, MwpError } from './lib/gateway.mjs';
import { loadIdentity, sha256Ref, signCommand, signDocument, tampered, utcNow } from './lib/signing.mjs';

const { values: options } = parseArgs({
  options: {
    gateway: { type: 'string', default: process.env.MWP_GATEWAY_URL },
    ca: { type: 'string', default: process.env.MWP_GATEWAY_CA },
    key: { type: 'string', default: process.env.MWP_AGENT_KEY },
    group: { type: 'string', default: process.env.MWP_GROUP_ID },
    timeout: { type: 'string', default: '60' },
    tamper: { type: 'boolean', default: false },
  },
});
for (const required of ['gateway', 'ca', 'key', 'group']) {
  if (!options[required]) {
    console.error(`missing --${required}`);
    process.exit(1);
  }
}

const report = (step, details = {}) => console.log(JSON.stringify({ step, ...details }));

const identity = loadIdentity(options.key);
const me = identity.principal.id;
const groupId = options.group;
const timeoutMs = Number(options.timeout) * 1000;
const ownActions = new Set();

let gateway;

/** Events of this Group seen so far, in Group order. */
const seen = () =>
  [...gateway.events.values()].filter((e) => e.groupId === groupId).sort((a, b) => a.sequence - b.sequence);

/** This Agent's current Membership in the Group, from the Membership Events it saw. */
function membership() {
  const changes = seen().filter(
    (e) => e.kind.startsWith('membership.') && e.payload?.membership?.member?.id === me,
  );
  return changes.at(-1)?.payload.membership;
}

/** The WorkItem's current contract, from the Events this Agent may see. */
function contractOf(workItemId) {
  let contract;
  for (const event of seen()) {
    if (event.workItemId !== workItemId) continue;
    if (event.kind === 'work.authorized') contract = event.payload.workItem.contract;
    if (event.kind === 'work.contract.revised') contract = event.payload.contract;
  }
  return contract;
}

/** ACK what the subscription surely delivered: Events not caused by this Agent's own
 * Commands (those may have come only as a receipt, which an ACK may not pass). */
function acknowledge() {
  const delivered = seen().filter((e) => !(e.cause?.type === 'command' && ownActions.has(e.cause.id)));
  const last = delivered.at(-1);
  if (last) gateway.ack(groupId, last.sequence);
  return last?.sequence;
}

function sign(kind, payload, workItemId) {
  return signCommand(identity, kind, payload, {
    groupId,
    workItemId,
    sessionEpoch: gateway.sessionEpoch,
    membershipEpoch: membership()?.membershipEpoch,
  });
}

/** Sign and send; its Events. Two refusals are waited out:
 * - AUTH_STALE_SESSION (not fatal): the Group learns of the Session Epoch HELLO opened from
 *   the Registry a moment later. Nothing was applied, so the Command is signed anew.
 * - BACKPRESSURE: the Command may have been accepted; the same Command again returns its
 *   receipt, where a new one would be a second action. */
async function send(kind, payload, workItemId) {
  let command = sign(kind, payload, workItemId);
  for (let attempt = 1; ; attempt += 1) {
    ownActions.add(command.actionId);
    try {
      const events = await gateway.command(command);
      report('command', { kind, actionId: command.actionId, events: events.map((e) => e.kind) });
      return events;
    } catch (error) {
      if (!(error instanceof MwpError) || attempt >= 50) throw error;
      report('retry', { kind, actionId: command.actionId, code: error.code });
      if (error.code === 'AUTH_STALE_SESSION' && !error.wire.fatal) {
        await sleep(200);
        command = sign(kind, payload, workItemId);
      } else if (error.code === 'BACKPRESSURE') {
        await sleep(error.wire.retryAfterMs ?? 250);
      } else {
        throw error;
      }
    }
  }
}

const only = (events, kind) => {
  const found = events.find((e) => e.kind === kind);
  if (!found) throw new Error(`no ${kind} Event among ${events.map((e) => e.kind)}`);
  return found;
};

async function main() {
  gateway = await GatewayClient.connect(options.gateway, { ca: readFileSync(options.ca) });
  const accepted = await gateway.hello(identity);
  report('hello', { agentId: me, sessionEpoch: accepted.sessionEpoch });

  const subscription = gateway.subscribe([{ groupId, afterSequence: 0 }]);
  // A refused SUBSCRIBE (GROUP_NOT_FOUND: not a member, or no such Group) names its frame.
  const refusal = gateway.answer(subscription, () => undefined, timeoutMs);
  refusal.catch(() => {});
  // The gateway closes its first pass over the Group's log (the replay) with an ACK frame.
  const replayed = gateway.waitFor(
    (v) => v?.acknowledgements?.find((a) => a.groupId === groupId)?.sequence,
    timeoutMs,
  );
  const through = await Promise.race([replayed, refusal]);
  report('subscribed', { groupId, replayedThrough: through });
  await Promise.race([takeOffer(), refusal]);
}

async function takeOffer() {
  const offered = await gateway.waitForEvent(
    (e) =>
      e.groupId === groupId &&
      e.kind === 'work.offer.created' &&
      e.payload.offers.some((o) => o.agentId === me && o.status === 'pending'),
    timeoutMs,
  );
  const offer = offered.payload.offers.find((o) => o.agentId === me);
  const workItemId = offered.workItemId;
  report('offered', { workItemId, offerId: offer.offerId, sequence: offered.sequence });
  acknowledge();
  const contract = contractOf(workItemId);
  if (!contract) {
    throw new Error('the WorkItem contract is not visible to this Agent (admit it before the work.authorize)');
  }

  const acceptance = await send(
    'work.accept_offer',
    { offerId: offer.offerId, contractVersion: offer.contractVersion },
    workItemId,
  );
  const owner = only(acceptance, 'work.offer.accepted').payload.owner;
  const ownershipEpoch = owner.ownershipEpoch;

  if (options.tamper) {
    const forged = tampered(sign('work.start', { ownershipEpoch }, workItemId));
    try {
      await gateway.command(forged);
      throw new Error('a Command with a corrupted signature was accepted');
    } catch (error) {
      if (!(error instanceof MwpError)) throw error;
      report('tampered-refused', { actionId: forged.actionId, frameId: error.frameId, error: error.wire });
    }
  }

  const started = await send('work.start', { ownershipEpoch }, workItemId);
  const leaseId = only(started, 'work.started').payload.executionLease.leaseId;

  // The result: content this Agent made, known by its hash. The gateway cannot carry
  // Artifact bytes yet, so only the signed manifest travels (its uri names the hash).
  const content = Buffer.from(`${workItemId}\n${contract.goal}\nwritten by ${me}\n`, 'utf8');
  const contentHash = sha256Ref(content);
  const manifest = signDocument(
    identity,
    {
      artifactId: `urn:mwp:artifact:${contentHash.slice('sha256:'.length, 'sha256:'.length + 32)}`,
      contentHash,
      uri: `urn:mwp:artifact:${contentHash.slice('sha256:'.length)}`,
      sizeBytes: content.length,
      mediaType: 'text/plain',
      schemaUri: 'urn:mwp:schema:text',
      producer: {
        agentId: me,
        agentCardVersion: owner.agentCardVersion,
        capabilities: owner.capabilityPins,
      },
      missionId: membership().missionId,
      groupId,
      workItemId,
      sourceArtifactHashes: [],
      toolVersions: [],
      modelVersions: [],
      classification: 'internal',
      createdAt: utcNow(),
    },
    'createdAt',
  );
  const published = await send('artifact.publish', { ownershipEpoch, leaseId, manifest }, workItemId);
  only(published, 'artifact.published');

  const evidence = contract.acceptanceCriteria.map((criterion) => ({
    evidenceId: `${workItemId}:evidence:${criterion.criterionId}`,
    criterionIds: [criterion.criterionId],
    result: 'passed',
  }));
  const submitted = await send(
    'work.submit',
    { ownershipEpoch, leaseId, artifactHashes: [contentHash], evidence },
    workItemId,
  );
  only(submitted, 'work.submitted');
  const acknowledged = acknowledge();
  await gateway.ping(); // frames are answered in order: the ACK was decided before this
  if (gateway.errors.length) throw new Error(`the gateway refused: ${JSON.stringify(gateway.errors)}`);
  report('submitted', { workItemId, contentHash, artifactId: manifest.artifactId, acknowledged });
}

let code = 0;
try {
  await main();
} catch (error) {
  code = /timed out/.test(error.message) ? 2 : 1;
  report('failed', { message: error.message, error: error.wire });
} finally {
  gateway?.close();
}
process.exit(code);
