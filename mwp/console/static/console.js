// The Approval console's page: logs a human in with their own key (WebCrypto Ed25519, the key
// never leaves this page), lists their Missions, shows one in full, and signs their decision.
"use strict";

const state = { key: null, identity: null };

// --- JCS (RFC 8785) and base64url --------------------------------------------------------------
// JSON.stringify spells strings and numbers exactly as RFC 8785 asks; members are sorted by
// UTF-16 code units, which is how JavaScript compares strings.
function jcs(value) {
  if (value === null || typeof value !== "object") return JSON.stringify(value);
  if (Array.isArray(value)) return "[" + value.map(jcs).join(",") + "]";
  const keys = Object.keys(value).filter((k) => value[k] !== undefined).sort();
  return "{" + keys.map((k) => JSON.stringify(k) + ":" + jcs(value[k])).join(",") + "}";
}

function b64url(bytes) {
  let text = "";
  for (const b of new Uint8Array(bytes)) text += String.fromCharCode(b);
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

async function signBytes(document) {
  const bytes = new TextEncoder().encode(jcs(document));
  return b64url(await crypto.subtle.sign({ name: "Ed25519" }, state.key, bytes));
}

// A signed document: its protected time copied into the signature envelope (mwp signing).
async function signed(document, timeMember) {
  const unsigned = { ...document };
  delete unsigned.signature;
  const value = await signBytes(unsigned);
  return {
    ...unsigned,
    signature: {
      algorithm: "Ed25519",
      keyId: state.identity.keyId,
      createdAt: unsigned[timeMember],
      value,
    },
  };
}

// --- the API ------------------------------------------------------------------------------------

class ConsoleError extends Error {
  constructor(wire) {
    super(`${wire.code}: ${wire.message}`);
    this.wire = wire;
  }
}

async function api(method, path, body) {
  const options = { method, headers: { "X-MWP-Console": "1" }, credentials: "same-origin" };
  if (body !== undefined) {
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  const response = await fetch(path, options);
  const value = await response.json().catch(() => ({}));
  if (!response.ok) throw new ConsoleError(value.error || { code: "INTERNAL_ERROR", message: response.statusText });
  return value;
}

// --- small DOM helpers ----------------------------------------------------------------------------

const $ = (id) => document.getElementById(id);

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

function short(id) {
  const tail = String(id).split(":").pop();
  return tail.length > 12 ? tail.slice(0, 12) + "…" : tail;
}

function notice(text, isError) {
  const box = $("notice");
  box.textContent = text;
  box.className = isError ? "error" : "";
  box.hidden = !text;
}

function show(section) {
  for (const id of ["login", "missions", "mission"]) $(id).hidden = id !== section;
}

// --- the key, kept across reloads -----------------------------------------------------------------
// The CryptoKey is imported non-extractable and kept in this origin's IndexedDB: a reload can
// sign again without the key file, nothing can read the private key back, and logging out
// deletes it.

function keyStore(mode, action) {
  return new Promise((resolve, reject) => {
    const opened = indexedDB.open("mwp-console", 1);
    opened.onupgradeneeded = () => opened.result.createObjectStore("keys");
    opened.onerror = () => reject(opened.error);
    opened.onsuccess = () => {
      const db = opened.result;
      const request = action(db.transaction("keys", mode).objectStore("keys"));
      request.onsuccess = () => { db.close(); resolve(request.result); };
      request.onerror = () => { db.close(); reject(request.error); };
    };
  });
}

const keepKey = () =>
  keyStore("readwrite", (s) => s.put({ key: state.key, identity: state.identity }, "current"));
const forgetKey = () => keyStore("readwrite", (s) => s.delete("current"));

async function restoreKey(principalId) {
  const kept = await keyStore("readonly", (s) => s.get("current")).catch(() => undefined);
  if (kept && kept.identity.id === principalId) {
    state.key = kept.key;
    state.identity = kept.identity;
  }
}

// --- logging in ----------------------------------------------------------------------------------

async function loadKey(file) {
  const keyFile = JSON.parse(await file.text());
  if (keyFile.format !== "mwp-signing-identity/1" || keyFile.principal?.type !== "human") {
    throw new Error("not a human's MWP signing key file");
  }
  const jwk = { kty: "OKP", crv: "Ed25519", d: keyFile.seed, x: keyFile.publicKey };
  state.key = await crypto.subtle.importKey("jwk", jwk, { name: "Ed25519" }, false, ["sign"]);
  state.identity = { id: keyFile.principal.id, keyId: keyFile.keyId };
}

async function logIn() {
  notice("");
  const file = $("key-file").files[0];
  if (!file) return notice("Choose your key file first.", true);
  try {
    await loadKey(file);
    const challenge = await api("POST", "/api/login/challenge", {
      humanId: state.identity.id,
      keyId: state.identity.keyId,
    });
    await api("POST", "/api/login", {
      challengeId: challenge.challengeId,
      signature: await signBytes(challenge),
    });
    $("key-file").value = "";
    await keepKey().catch(() => {});  // without IndexedDB: kept for this page only
    await route();
  } catch (error) {
    notice(`Login refused: ${error.message}`, true);
  }
}

async function logOut() {
  await api("POST", "/api/logout").catch(() => {});
  await forgetKey().catch(() => {});
  state.key = state.identity = null;
  location.hash = "#/";
  await route();
}

// --- the Missions -------------------------------------------------------------------------------

async function showMissions() {
  const { missions } = await api("GET", "/api/missions");
  missions.sort((a, b) => Number(b.awaitingApproval) - Number(a.awaitingApproval));
  const rows = $("mission-rows");
  rows.replaceChildren();
  for (const m of missions) {
    const row = el("tr");
    row.dataset.missionId = m.missionId;
    const cell = el("td");
    const link = el("a", m.objective || m.missionId);
    link.href = `#/missions/${encodeURIComponent(m.missionId)}`;
    cell.append(link, el("div", short(m.missionId), "hint"));
    const stateCell = el("td");
    stateCell.append(el("span", m.state, `state ${m.state}`));
    row.append(cell, stateCell, el("td", m.revision), el("td", m.workItems), el("td", m.deadline));
    rows.append(row);
  }
  $("no-missions").hidden = missions.length > 0;
  show("missions");
}

function fact(list, name, value) {
  list.append(el("dt", name), el("dd", value ?? "—"));
}

async function showMission(missionId) {
  const detail = await api("GET", `/api/missions/${encodeURIComponent(missionId)}`);
  const m = detail.mission;
  $("mission-objective").textContent = m.objective || m.missionId;
  const facts = $("mission-facts");
  facts.replaceChildren();
  fact(facts, "Mission", m.missionId);
  fact(facts, "State", m.state);
  fact(facts, "Revision", m.revision);
  fact(facts, "Coordinator", m.coordinator?.agentId);
  fact(facts, "Deadline", m.deadline);
  if (m.budgetUsed) fact(facts, "Budget used", JSON.stringify(m.budgetUsed));
  const submission = detail.submission;
  $("submission").hidden = !submission;
  if (submission) {
    $("submission-facts").textContent =
      `Revision ${submission.missionRevision}, ${submission.artifactHashes.length} Artifacts.`;
  }
  renderWorkItems(detail.workItems);
  renderArtifacts(missionId, detail.artifacts, submission);
  $("viewer").hidden = true;
  const awaiting = m.state === "awaiting_approval";
  $("decision").hidden = !awaiting;
  $("decision").dataset.missionId = missionId;
  $("decided").hidden = !detail.approval;
  if (detail.approval) {
    const a = detail.approval;
    $("decided-text").textContent =
      `${a.decision} by ${a.approver?.id} at ${a.occurredAt} (revision ${a.missionRevision})` +
      (a.comments ? `: ${a.comments}` : "");
  }
  show("mission");
}

function renderWorkItems(items) {
  const box = $("work-items");
  box.replaceChildren();
  for (const item of items) {
    const part = el("div");
    part.className = "work-item";
    part.dataset.workItemId = item.workItemId;
    const title = el("h4", item.goal || item.workItemId);
    title.append(" ", el("span", item.state, `state ${item.state}`));
    part.append(title, el("div", `${short(item.workItemId)} · owner ${item.owner || "—"}`, "hint"));
    for (const c of item.criteria) {
      const criterion = el("div", null, "criterion");
      criterion.dataset.criterionId = c.criterionId;
      criterion.append(el("strong", c.criterionId), " ", el("span", c.description));
      if (c.evidence.length === 0) criterion.append(el("div", "No Evidence submitted.", "evidence missing"));
      for (const e of c.evidence) {
        // A submission's Evidence may be a reference or a whole Evidence document.
        const line = [
          e.result,
          e.type,
          e.method && `(${e.method})`,
          e.subject && `— ${e.subject}`,
          e.generatedBy?.id && `by ${e.generatedBy.id}`,
          `· ${e.evidenceId}`,
        ].filter(Boolean).join(" ");
        const entry = el("div", line, "evidence");
        entry.dataset.evidenceId = e.evidenceId;
        criterion.append(entry);
      }
      part.append(criterion);
    }
    box.append(part);
  }
}

function renderArtifacts(missionId, artifacts, submission) {
  const rows = $("artifact-rows");
  rows.replaceChildren();
  const submitted = new Set(submission ? submission.artifactHashes : []);
  for (const a of artifacts) {
    const row = el("tr");
    row.dataset.contentHash = a.contentHash;
    const name = el("td");
    name.append(el("code", a.contentHash.slice(0, 23) + "…"));
    if (submitted.has(a.contentHash)) name.append(" ", el("span", "submitted", "state"));
    const open = el("button", "Open");
    open.type = "button";
    open.addEventListener("click", () => openArtifact(missionId, a));
    const action = el("td");
    action.append(open);
    row.append(name, el("td", a.mediaType), el("td", a.sizeBytes), el("td", short(a.workItemId)), action);
    rows.append(row);
  }
}

async function sha256(bytes) {
  const digest = await crypto.subtle.digest("SHA-256", bytes);
  return "sha256:" + [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

async function openArtifact(missionId, artifact) {
  const path = `/api/missions/${encodeURIComponent(missionId)}/artifacts/${encodeURIComponent(artifact.contentHash)}`;
  const response = await fetch(path, { credentials: "same-origin" });
  const viewer = $("viewer");
  viewer.hidden = false;
  $("viewer-title").textContent = artifact.contentHash;
  const check = $("viewer-check");
  $("viewer-text").hidden = $("viewer-image").hidden = true;
  if (!response.ok) {
    const value = await response.json().catch(() => ({}));
    check.textContent = `Not readable: ${value.error?.message || response.statusText}`;
    check.className = "check bad";
    return;
  }
  const bytes = await response.arrayBuffer();
  const actual = await sha256(bytes);
  const matches = actual === artifact.contentHash;
  // The console checked the bytes on its side too; this is the browser's own check.
  check.textContent = matches
    ? `Hash verified in your browser: ${actual}`
    : `Hash MISMATCH: the bytes hash to ${actual}`;
  check.className = matches ? "check ok" : "check bad";
  if (!matches) return;
  const type = response.headers.get("Content-Type") || "";
  if (type.startsWith("image/")) {
    const image = $("viewer-image");
    image.src = URL.createObjectURL(new Blob([bytes], { type }));
    image.hidden = false;
  } else if (type.startsWith("text/")) {
    const text = $("viewer-text");
    text.textContent = new TextDecoder().decode(bytes);
    text.hidden = false;
  } else {
    check.textContent += ` (${bytes.byteLength} bytes, shown as no text)`;
  }
}

// --- the decision ---------------------------------------------------------------------------------

async function decide(decision) {
  notice("");
  const missionId = $("decision").dataset.missionId;
  if (!state.key) {
    notice("Your key is not loaded in this page: log in again to sign.", true);
    return;
  }
  try {
    const reason = decision === "request_changes" ? $("reason").value : "";
    const base = `/api/missions/${encodeURIComponent(missionId)}`;
    const drafts = await api("POST", `${base}/drafts`, { decision, reason });
    const approval = await signed(drafts.approval, "occurredAt");
    const command = await signed(
      { ...drafts.command, payload: { ...drafts.command.payload, approval } },
      "issuedAt",
    );
    const result = await api("POST", `${base}/decisions`, { command });
    $("reason").value = "";
    notice(`Recorded: ${result.events.join(", ")} (Group sequence ${result.receipt.lastSequence}).`);
    await showMission(missionId);
  } catch (error) {
    notice(`Refused: ${error.message}`, true);
  }
}

// --- routing ---------------------------------------------------------------------------------------

async function route() {
  try {
    const me = await api("GET", "/api/me");
    $("who").hidden = false;
    $("who-name").textContent = me.principal.id;
    if (!state.key) await restoreKey(me.principal.id);
  } catch (error) {
    $("who").hidden = true;
    show("login");
    return;
  }
  const match = location.hash.match(/^#\/missions\/(.+)$/);
  try {
    if (match) await showMission(decodeURIComponent(match[1]));
    else await showMissions();
  } catch (error) {
    notice(error.message, true);
  }
}

window.addEventListener("hashchange", () => { notice(""); route(); });
window.addEventListener("DOMContentLoaded", () => {
  $("login-button").addEventListener("click", logIn);
  $("logout").addEventListener("click", logOut);
  $("approve").addEventListener("click", () => decide("approve"));
  $("request-changes").addEventListener("click", () => decide("request_changes"));
  route();
});
