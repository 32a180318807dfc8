// A client of the Group gateway's WebSocket binding (docs/gateway.md): one TLS 1.3
// connection, one JSON text frame per message; HELLO, SUBSCRIBE, ACK, PING and COMMAND.
//
//   const gateway = await GatewayClient.connect('wss://127.0.0.1:7443', { ca });
//   await gateway.hello(identity);                    // the server_accept frame
//   await gateway.subscribe([{ groupId, afterSequence: 0 }]);
//   const offer = await gateway.waitForEvent((e) => e.kind === 'work.offer.created');
//   const events = await gateway.command(signedCommand); // its Events, in Group order
//
// Every EVENT frame lands in one inbox, deduplicated by Event ID: a Command's receipt and
// the subscription carry the same Events.

import { createHash, randomBytes } from 'node:crypto';

import WebSocket from 'ws';

import { jcs, newId, PROTOCOL_VERSION, signBytes, utcNow } from './signing.mjs';

const TRANSCRIPT_CONTEXT = 'urn:missionweave-temporal:gateway:hello-transcript:1';
// The bound the gateway itself buffers (MAX_MESSAGE_BYTES in mwp/gateway/frames.py): no
// frame it sends is larger, and a bound keeps a misbehaving peer from filling memory.
const MAX_PAYLOAD = 4 * (512 + 16) * 1024;

/** An ERROR frame's error object (error.schema.json), as a JavaScript error. */
export class MwpError extends Error {
  constructor(wire) {
    super(`${wire.code}: ${wire.message}`);
    this.wire = wire;
    this.code = wire.code;
  }
}

function frame(frameType, members) {
  return { protocolVersion: PROTOCOL_VERSION, frameId: newId(), frameType, ...members };
}

export class GatewayClient {
  constructor(socket, serverCertificate) {
    this.socket = socket;
    this.serverCertificate = serverCertificate; // sha256 of the TLS leaf this client verified
    this.sessionEpoch = undefined;
    this.events = new Map(); // eventId -> Event
    this.positions = new Map(); // groupId -> last Event or ACK watermark seen
    this.errors = []; // ERROR objects no call was waiting for
    this.waiters = new Set();
    this.closed = null;
    socket.on('message', (data, isBinary) => this.#take(data, isBinary));
    socket.on('close', (code) => this.#fail(new Error(`the gateway closed the connection (${code})`)));
    socket.on('error', (error) => this.#fail(error));
  }

  /** Connect over TLS 1.3 only, trusting `ca` (PEM) as the gateway's trust anchor. */
  static connect(url, { ca }) {
    return new Promise((resolve, reject) => {
      const socket = new WebSocket(url, {
        ca,
        minVersion: 'TLSv1.3',
        maxPayload: MAX_PAYLOAD,
        perMessageDeflate: false,
      });
      let certificate;
      socket.once('upgrade', (response) => {
        const der = response.socket.getPeerCertificate().raw;
        certificate = `sha256:${createHash('sha256').update(der).digest('hex')}`;
      });
      socket.once('open', () => resolve(new GatewayClient(socket, certificate)));
      socket.once('error', reject);
    });
  }

  close() {
    this.socket.close();
  }

  send(value) {
    this.socket.send(JSON.stringify(value));
  }

  #take(data, isBinary) {
    if (isBinary) return; // the binding has text frames only
    const value = JSON.parse(data.toString('utf8'));
    if (value.frameType === 'EVENT') {
      const event = value.event;
      this.#advance(event.groupId, event.sequence);
      if (!this.events.has(event.eventId)) this.events.set(event.eventId, event);
    } else if (value.frameType === 'ACK') {
      for (const ack of value.acknowledgements) this.#advance(ack.groupId, ack.sequence);
    }
    let claimed = false;
    for (const waiter of [...this.waiters]) claimed = waiter.check(value) || claimed;
    if (value.frameType === 'ERROR' && !claimed) this.errors.push(value.error);
  }

  #advance(groupId, sequence) {
    this.positions.set(groupId, Math.max(this.positions.get(groupId) ?? -1, sequence));
  }

  #fail(error) {
    this.closed = error;
    for (const waiter of [...this.waiters]) waiter.reject(error);
  }

  /**
   * Resolve with `check(frame)`'s first value other than undefined, evaluated now (frame
   * null) and on every frame received; reject after `timeoutMs` or when the connection ends.
   * `check` may throw to reject (an ERROR naming the caller's frame).
   */
  waitFor(check, timeoutMs = 15000) {
    return new Promise((resolve, reject) => {
      const waiter = {
        check: (value) => {
          let result;
          try {
            result = check(value);
          } catch (error) {
            done();
            reject(error);
            return true;
          }
          if (result === undefined) return false;
          done();
          resolve(result);
          return true;
        },
        reject: (error) => {
          done();
          reject(error);
        },
      };
      const timer = setTimeout(() => waiter.reject(new Error('timed out waiting for the gateway')), timeoutMs);
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(waiter);
      };
      if (this.closed) return waiter.reject(this.closed);
      this.waiters.add(waiter);
      waiter.check(null);
    });
  }

  /** The next frame answering `frameId`: `accept(frame)`'s value; an ERROR naming it throws. */
  answer(frameId, accept, timeoutMs) {
    return this.waitFor((value) => {
      if (value === null) return undefined;
      if (value.frameType === 'ERROR' && value.error.relatedFrameId === frameId) {
        throw new MwpError(value.error);
      }
      return accept(value);
    }, timeoutMs);
  }

  /** HELLO's four phases; the server_accept frame. */
  async hello(identity) {
    const init = frame('HELLO', {
      phase: 'client_init',
      agentId: identity.principal.id,
      keyId: identity.keyId,
      clientNonce: randomBytes(32).toString('base64url'),
      supportedVersions: [PROTOCOL_VERSION],
    });
    this.send(init);
    const challenge = await this.answer(init.frameId, (v) =>
      v.phase === 'server_challenge' ? v : undefined,
    );
    if (challenge.clientNonce !== init.clientNonce) {
      throw new Error('the challenge answers another client nonce');
    }
    // The exact transcript the gateway verifies (mwp/gateway/hello.py `transcript`): it binds
    // the answer to this connection's challenge and to the certificate this client verified.
    const transcript = jcs({
      context: TRANSCRIPT_CONTEXT,
      selectedVersion: challenge.selectedVersion,
      agentId: init.agentId,
      keyId: init.keyId,
      clientNonce: init.clientNonce,
      serverNonce: challenge.serverNonce,
      challenge: challenge.challenge,
      serverCertificate: this.serverCertificate,
    });
    const response = frame('HELLO', {
      phase: 'client_response',
      agentId: init.agentId,
      keyId: init.keyId,
      clientNonce: init.clientNonce,
      serverNonce: challenge.serverNonce,
      challengeSignature: signBytes(identity, transcript),
    });
    this.send(response);
    const accepted = await this.answer(response.frameId, (v) =>
      v.phase === 'server_accept' ? v : undefined,
    );
    this.sessionEpoch = accepted.sessionEpoch;
    return accepted;
  }

  /** SUBSCRIBE to `groups` ({groupId, afterSequence, attention?}); the frame's ID. */
  subscribe(groups) {
    const subscribe = frame('SUBSCRIBE', { subscriptionId: newId(), groups });
    this.send(subscribe);
    return subscribe.frameId;
  }

  /** Record `sequence` as this Agent's Cursor of `groupId` (stored by the gateway). */
  ack(groupId, sequence) {
    this.send(frame('ACK', { acknowledgements: [{ groupId, sequence }], sentAt: utcNow() }));
  }

  async ping() {
    const ping = frame('PING', { nonce: randomBytes(16).toString('base64url'), sentAt: utcNow() });
    this.send(ping);
    return this.answer(ping.frameId, (v) => (v.replyToNonce === ping.nonce ? v : undefined));
  }

  /** The first Event received (now or later) for which `match(event)` holds. */
  waitForEvent(match, timeoutMs) {
    return this.waitFor(() => {
      for (const event of this.events.values()) if (match(event)) return event;
      return undefined;
    }, timeoutMs);
  }

  /**
   * Send a signed Command; its Events (cause: this Command) once the ACK closing the
   * receipt arrives, in Group order. A refusal throws its MwpError.
   */
  async command(command, timeoutMs = 20000) {
    const send = frame('COMMAND', { command });
    this.send(send);
    const cause = (e) => e.cause?.type === 'command' && e.cause.id === command.actionId;
    return this.#answerCommand(send.frameId, cause, timeoutMs);
  }

  async #answerCommand(frameId, cause, timeoutMs) {
    try {
      return await this.answer(
        frameId,
        (value) => {
          if (value.frameType !== 'ACK') return undefined;
          const mine = [...this.events.values()].filter(cause).sort((a, b) => a.sequence - b.sequence);
          const [ack] = value.acknowledgements;
          const last = mine.at(-1);
          if (!last || value.acknowledgements.length !== 1) return undefined;
          return ack.groupId === last.groupId && ack.sequence === last.sequence ? mine : undefined;
        },
        timeoutMs,
      );
    } catch (error) {
      if (error instanceof MwpError) error.frameId = frameId; // the COMMAND frame it refused
      throw error;
    }
  }
}
