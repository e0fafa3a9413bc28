// A round's receipt checked in the browser, with WebCrypto alone: no server is asked anything.
// The same checks as `sabot receipt verify` (host_tools/sabot/receipt.py): the result frame is
// signed by the shoe's key (ECDSA P-256 over SHA-256 of its body), the initial cards are the
// frame it seals (its chain field is their digest), the checkpoint is the shoe's log's and signed
// by the shoe (C2SP signed-note type 0x02), enough trusted witnesses cosigned it (type 0x04,
// Ed25519 over "cosignature/v1\ntime T\n" and the checkpoint), and the RFC 6962 inclusion proof
// places the result in the tree the checkpoint heads. A blackjack round's receipt holds its signed
// blackjack_result alone (no initial cards): each hand's cards as the shoe placed them.
"use strict";
(() => {
  const enc = new TextEncoder();
  // cards as the players' pages show them (10♠ Q♦), where the CLI says the store's TS QD
  const RANKS = ["A", "2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K"], SUITS = "\u2660\u2665\u2666\u2663";
  const WINNERS = { 1: "Player wins", 2: "Banker wins", 3: "a Tie" };
  const HEADER = 46, SIG = 64, T_INITIAL_CARDS = 3, T_RESULT = 4, T_BLACKJACK_RESULT = 10, T_RESULT21 = 11;

  class Refused extends Error {}
  const refuse = (why) => { throw new Refused(why); };

  const b64 = (s) => {
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(s) || s.length % 4) refuse("not a receipt: a line is not base64");
    return Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
  };
  const cat = (...parts) => {
    const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) { out.set(p, at); at += p.length; }
    return out;
  };
  const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
  const sha256 = async (data) => new Uint8Array(await crypto.subtle.digest("SHA-256", data));
  const hex8 = (n) => n.toString(16).padStart(8, "0");
  const card = (b) => (b < 52 ? RANKS[Math.floor(b / 4)] + SUITS[b % 4] : "?");

  function frame(raw) {
    if (raw.length < HEADER || raw[0] !== 2) refuse("the receipt's frames are not a shoe's");
    const v = new DataView(raw.buffer, raw.byteOffset, raw.length);
    const type = raw[1];
    const signed = type !== T_INITIAL_CARDS;
    const body = signed ? raw.slice(0, raw.length - SIG) : raw;
    return { type, keyId: v.getUint16(2), shoeId: v.getUint32(4), boot: v.getUint16(8),
             seq: v.getUint32(10), chain: raw.slice(14, 46), body,
             payload: body.slice(HEADER), sig: signed ? raw.slice(raw.length - SIG) : null };
  }

  function result(f) {
    const p = f.payload, v = new DataView(p.buffer, p.byteOffset, p.length);
    const np = p[4] >> 4, nb = p[4] & 15;
    if (np < 2 || np > 3 || nb < 2 || nb > 3 || p.length !== 9 + np + nb) refuse("the result frame is malformed");
    const cards = Array.from(p.slice(6, 6 + np + nb));
    // a card the shoe could not read has no value: its hand's total is unknown too
    const total = (cs) => (cs.some((b) => b >= 52) ? "?"
      : cs.reduce((t, b) => t + Math.min(Math.floor(b / 4) + 1, 10) % 10, 0) % 10);
    return { shoe: v.getUint16(0), round: v.getUint16(2), player: cards.slice(0, np), dummy: p[5] !== 0,
             banker: cards.slice(np), winner: WINNERS[v.getUint16(6 + np + nb) & 3] || "no winner",
             pTotal: total(cards.slice(0, np)), bTotal: total(cards.slice(np)) };
  }

  // A 21 Baccarat result: the table's rule bytes (docs/PROTOCOL.md), each hand's cards, the
  // outcome the shoe signed. Held to the rules as `sabot receipt verify` holds it: the cards dealt
  // again in the order they came (P B P B, the Player's draws, the Banker's) must make the same
  // hands, and the winner and pair bits must be theirs. A hand's total is its best (an ace 11
  // where that keeps it at 21 or under, unless the table counts aces 1).
  function result21(f) {
    const p = f.payload;
    const malformed = () => refuse("the result frame is malformed");
    if (p.length < 9) malformed();
    const np = p[4] >> 4, nb = p[4] & 15, pr = p[6], br = p[7];
    if (np < 2 || np > 11 || nb < 2 || nb > 11 || p.length !== 9 + np + nb || p[5] > 1) malformed();
    if ((pr & 31) < 12 || (pr & 31) > 21 || br & 0xC0 || (br && ((br & 31) < 12 || (br & 31) > 21))) malformed();
    const cards = Array.from(p.slice(8, 8 + np + nb)), o = p[8 + np + nb];
    if (cards.some((b) => b >= 52) || o & ~63 || !(o & 3)) malformed();
    const score = (cs) => {
      const hard = cs.reduce((t, b) => t + Math.min(Math.floor(b / 4) + 1, 10), 0);
      const soft = !(pr & 64) && cs.some((b) => b < 4) && hard + 10 <= 21;
      return { t: soft ? hard + 10 : hard, soft };
    };
    const draws = (cs, below, softRule) => {
      const s = score(cs);
      return cs.length < 11 && (s.t < below || (s.soft && s.t === below && !!softRule));
    };
    const player = cards.slice(0, np), banker = cards.slice(np);
    const order = [player[0], banker[0], player[1], banker[1], ...player.slice(2), ...banker.slice(2)];
    const P = [order[0], order[2]], B = [order[1], order[3]];
    let i = 4;
    while (i < order.length && draws(P, pr & 31, pr & 32)) P.push(order[i++]);
    const pt = score(P).t;
    const bankerDraws = () => (br ? draws(B, br & 31, br & 32)
      : pt <= 21 && score(B).t < pt && B.length < 11);  // beat_player
    while (i < order.length && bankerDraws()) B.push(order[i++]);
    const bt = score(B).t;
    const won = pt === bt ? 3 : (pt > 21) !== (bt > 21) ? (pt > 21 ? 2 : 1)
      : pt <= 21 ? (pt > bt ? 1 : 2) : (pt < bt ? 1 : 2);
    const pairs = (cs, pair, suited) => (cs[0] >> 2 === cs[1] >> 2 ? pair | (cs[0] === cs[1] ? suited : 0) : 0);
    if (P.length !== np || B.length !== nb || draws(P, pr & 31, pr & 32) || bankerDraws() ||
        o !== (won | pairs(player, 4, 8) | pairs(banker, 16, 32)))
      refuse("the shoe's round is not one the rules deal (its table's settings draw or score these cards otherwise)");
    return { shoe: (p[0] << 8) | p[1], round: (p[2] << 8) | p[3], player, banker,
             dummy: p[5] !== 0, winner: WINNERS[won], pTotal: pt, bTotal: bt };
  }

  // A blackjack result: seats, every card and press, the hand each card is in (a nibble, 15 the
  // dealer's); in words, each seat's hands from the dealer's left, then the dealer's.
  function blackjack(f) {
    const p = f.payload;
    if (p.length < 7) refuse("the result frame is malformed");
    const n = p[6], events = Array.from(p.slice(7, 7 + n));
    if (events.length !== n || events.some((b) => b >= 52 && (b < 0xF1 || b > 0xF3))) refuse("the result frame is malformed");
    const cards = events.filter((b) => b < 52), nib = p.slice(7 + n);
    if (nib.length !== (cards.length + 1) >> 1 || !p[4] || p[4] >> 7) refuse("the result frame is malformed");
    if (p[5] & 4)  // its cards only accounted for: no hands to hold to the rules
      return { shoe: (p[0] << 8) | p[1], round: (p[2] << 8) | p[3],
               words: `voided by a supervisor: no wager on it settles, and its cards (${cards.map(card).join(" ") || "none"}) were set aside` };
    const placed = cards.map((_, k) => (nib[k >> 1] >> (k & 1 ? 0 : 4)) & 15);
    const seats = [1, 2, 3, 4, 5, 6, 7].filter((s) => p[4] >> (s - 1) & 1);
    // each seat's first card opens its first hand; the hands after it, to the next seat's, are its split hands
    const firsts = placed.slice(0, seats.length);
    const hands = new Map();
    placed.forEach((h, k) => { if (!hands.has(h)) hands.set(h, []); hands.get(h).push(cards[k]); });
    const value = (b) => Math.min(Math.floor(b / 4) + 1, 10);
    const total = (cs, initial) => {
      const hard = cs.reduce((t, b) => t + value(b), 0);
      const soft = cs.some((b) => value(b) === 1) && hard + 10 <= 21;
      if (initial && cs.length === 2 && soft && hard + 10 === 21) return "Blackjack";
      return hard > 21 ? "bust" : soft ? `soft ${hard + 10}` : `${hard}`;
    };
    const played = [...hands.keys()].filter((h) => h !== 15).sort((a, b) => a - b);
    const words = played.map((h) => {
      const at = firsts.filter((x) => x <= h).length - 1;
      const split = (firsts[at + 1] ?? played.length) - firsts[at] > 1;
      return `seat ${seats[at]} ${hands.get(h).map(card).join(" ")} (${total(hands.get(h), !split)}${split ? ", split" : ""})`;
    });
    const dealer = hands.get(15) || [];
    return { shoe: (p[0] << 8) | p[1], round: (p[2] << 8) | p[3],
             words: `${words.join(", ")}; dealer ${dealer.map(card).join(" ")} (${total(dealer, true)}, ${dealer.length} cards)` };
  }

  function derToRaw(der) {  // an ASN.1 ECDSA signature as WebCrypto's r||s
    if (der[0] !== 0x30 || der[2] !== 0x02) refuse("the checkpoint's shoe signature is malformed");
    const rl = der[3], r = der.slice(4, 4 + rl);
    if (der[4 + rl] !== 0x02) refuse("the checkpoint's shoe signature is malformed");
    const s = der.slice(6 + rl, 6 + rl + der[5 + rl]);
    const fit = (x) => { const t = x.slice(Math.max(0, x.length - 32)); return cat(new Uint8Array(32 - t.length), t); };
    return cat(fit(r), fit(s));
  }

  const pemToDer = (pem) => {
    try {
      return b64(pem.replace(/-----[^-]+-----/g, "").replace(/\s+/g, ""));
    } catch (e) {
      refuse("the shoe's key box holds no public key (PEM) nor a shoe registry (JSON)");
    }
  };

  // {keys, table}: a PEM public key (no table), or the registry's JSON (the shoe's table in it)
  function shoeKeys(given, shoeId) {
    given = given.trim();
    if (given.startsWith("{")) {
      let reg;
      try { reg = JSON.parse(given); } catch (e) { refuse("the registry is not JSON"); }
      const entry = (reg.shoes || []).find((s) => s.shoe_id === shoeId);
      if (!entry) refuse(`shoe 0x${hex8(shoeId)} is not in the registry given`);
      return { keys: entry.public_keys.map((k) => ({ version: k.version, der: pemToDer(k.key) })),
               table: typeof entry.table === "string" ? entry.table : null };
    }
    return { keys: [{ version: null, der: pemToDer(given) }], table: null };
  }

  async function inclusion(leaf, index, size, proof, root) {
    if (index >= size) return false;
    let fn = index, sn = size - 1, r = leaf;
    const node = (a, b) => sha256(cat(Uint8Array.of(1), a, b));
    for (const p of proof) {
      if (sn === 0) return false;
      if (fn % 2 === 1 || fn === sn) {
        r = await node(p, r);
        if (fn % 2 === 0) while (fn !== 0 && fn % 2 === 0) { fn = Math.floor(fn / 2); sn = Math.floor(sn / 2); }
      } else {
        r = await node(r, p);
      }
      fn = Math.floor(fn / 2); sn = Math.floor(sn / 2);
    }
    return sn === 0 && same(r, root);
  }

  // `named`: the table, shoe and round the table's QR code named, when the receipt is the one
  // fetched from its link: a receipt of another round (another table's, its shoe's another) is
  // refused, whatever it proves
  async function verify(text, keysGiven, vkeys, quorum, named) {
    text = text.replace(/\r\n/g, "\n").trim() + "\n";  // as pasted: blank lines around it are not its
    const [head, ...rest] = text.split("\n\n");
    const signed = rest.join("\n\n");
    const lines = head.split("\n");
    if (lines[0] !== "c2sp.org/tlog-proof@v1" || !signed) refuse("not a receipt: a receipt begins with c2sp.org/tlog-proof@v1");
    if (!(lines[1] || "").startsWith("extra ") || !/^index (0|[1-9][0-9]*)$/.test(lines[2] || "")) refuse("not a receipt: no frames or index");
    const extra = b64(lines[1].slice(6));
    const n = (extra[0] << 8) | extra[1];
    const initialRaw = extra.slice(2, 2 + n), resultRaw = extra.slice(2 + n);
    const index = Number(lines[2].slice(6));
    const proof = lines.slice(3).map(b64);
    if (proof.some((h) => h.length !== 32)) refuse("not a receipt: its proof is not SHA-256 hashes");
    const res = frame(resultRaw);
    const isBlackjack = res.type === T_BLACKJACK_RESULT && n === 0;
    const initial = isBlackjack ? null : frame(initialRaw);
    if (!isBlackjack && (initial.type !== T_INITIAL_CARDS || (res.type !== T_RESULT && res.type !== T_RESULT21))) refuse("the receipt's frames are not a round's initial cards and result");
    const rec = isBlackjack ? blackjack(res) : res.type === T_RESULT21 ? result21(res) : result(res);
    const shoe = `0x${hex8(res.shoeId)}`;
    const { keys, table } = shoeKeys(keysGiven, res.shoeId);
    const own = keys.find((k) => k.version === null || k.version === res.keyId);
    if (!own) refuse(`the result is not signed by shoe ${shoe}'s key: it was altered or made by someone else`);
    const frameKey = await crypto.subtle.importKey("spki", own.der, { name: "ECDSA", namedCurve: "P-256" }, false, ["verify"]);
    // the shoe's frames carry s in its low form (s <= (n - 1) / 2), as sabot's host checks too
    const HALF = "7fffffff800000007fffffffffffffffde737d56d38bcf4279dce5617e3192a8";
    const sHex = [...res.sig.slice(32)].map((b) => b.toString(16).padStart(2, "0")).join("");
    if (res.sig.length !== 64 || sHex > HALF ||
        !await crypto.subtle.verify({ name: "ECDSA", hash: "SHA-256" }, frameKey, res.sig, res.body))
      refuse(`the result is not signed by shoe ${shoe}'s key: it was altered or made by someone else`);
    if (!isBlackjack) {
      if (!same(res.chain, await sha256(initial.body)) || initial.seq + 1 !== res.seq)
        refuse("the initial cards are not the ones the signed result seals: they were altered");
      const ip = initial.payload;
      const first = [ip[4], ip[6], ip[5], ip[7]];
      if (!same(Uint8Array.from(first), Uint8Array.from([...rec.player.slice(0, 2), ...rec.banker.slice(0, 2)])))
        refuse("the initial cards do not begin the result's hands");
    }
    // the checkpoint: text, then its signatures
    const at = signed.lastIndexOf("\n\n");
    if (at < 0) refuse("the receipt's checkpoint is not one");
    const cpText = signed.slice(0, at + 1);
    const [origin, sizeText, rootText] = cpText.split("\n");
    if (origin !== `sabot.shoe/${hex8(res.shoeId)}`) refuse(`the checkpoint is of another log (${origin}), not shoe ${shoe}'s`);
    const size = Number(sizeText), root = b64(rootText);
    const sigs = signed.slice(at + 2).split("\n").filter((l) => l).map((l) => {
      const m = /^\u2014 (\S+) (\S+)$/.exec(l);
      if (!m) refuse("the checkpoint's signatures do not hold: a line is not a signature");
      const raw = b64(m[2]);
      return { name: m[1], id: new DataView(raw.buffer).getUint32(0), sig: raw.slice(4) };
    });
    let shoeSigned = false;
    for (const k of keys) {
      const id = new DataView((await sha256(k.der)).buffer).getUint32(0);
      for (const s of sigs.filter((s) => s.name === origin && s.id === id)) {
        const key = await crypto.subtle.importKey("spki", k.der, { name: "ECDSA", namedCurve: "P-256" }, false, ["verify"]);
        if (!await crypto.subtle.verify({ name: "ECDSA", hash: "SHA-256" }, key, derToRaw(s.sig), enc.encode(cpText)))
          refuse(`the checkpoint's signatures do not hold: the note's signature by ${origin} does not verify`);
        shoeSigned = true;
      }
    }
    if (!shoeSigned) refuse("the checkpoint is not signed by the shoe: only its own element heads its log");
    const cosigned = [];
    let latest = 0n;
    for (const vkey of vkeys) {
      // NAME+KEYID+BASE64: the base64 may hold "+" itself
      const [name, hexId, ...b64Parts] = vkey.split("+");
      const keyB64 = b64Parts.join("+");
      const blob = b64(keyB64 || "");
      if (!name || blob[0] !== 4 || blob.length !== 33) refuse(`not a witness verifier key: ${vkey}`);
      const id = new DataView((await sha256(cat(enc.encode(name + "\n"), blob))).buffer).getUint32(0);
      if (hex8(id) !== (hexId || "").toLowerCase()) refuse(`witness ${name}: its key ID is not its key's`);
      const key = await crypto.subtle.importKey("raw", blob.slice(1), { name: "Ed25519" }, false, ["verify"]);
      for (const s of sigs.filter((s) => s.name === name && s.id === id)) {
        if (s.sig.length !== 72) refuse(`the checkpoint's signatures do not hold: ${name}'s is malformed`);
        const t = new DataView(s.sig.buffer, s.sig.byteOffset).getBigUint64(0);
        const msg = enc.encode(`cosignature/v1\ntime ${t}\n` + cpText);
        if (!await crypto.subtle.verify({ name: "Ed25519" }, key, s.sig.slice(8), msg))
          refuse(`the checkpoint's signatures do not hold: the note's signature by ${name} does not verify`);
        if (!cosigned.includes(name)) cosigned.push(name);  // one witness's line twice counts once
        if (t > latest) latest = t;
      }
    }
    if (cosigned.length < quorum) refuse(`${cosigned.length} of the witnesses trusted here cosigned the checkpoint; ${quorum} must`);
    if (!await inclusion(await sha256(cat(Uint8Array.of(0), resultRaw)), index, size, proof, root))
      refuse("the result is not in the log the checkpoint heads (its inclusion proof does not hold)");
    const atTable = table ? ` (table ${table})` : "";
    if (named && (rec.shoe !== named.shoe || rec.round !== named.round ||
                  (table !== null && table !== named.table)))
      refuse(`this receipt is of shoe ${shoe}${atTable}, round ${rec.round} of its shoe ${rec.shoe}: ` +
             `not the round the table's code named (table ${named.table}, shoe ${named.shoe}, ` +
             `round ${named.round}): the casino's server sent another round's receipt`);
    const when = new Date(Number(latest) * 1000).toISOString().slice(0, 16).replace("T", " ") + " UTC";
    const hand = (who, cs, t) => `${who} ${cs.map(card).join(" ")} (${t})`;
    const dummy = rec.dummy ? ", a dummy hand (a supervisor kept it with no wagers on it: it settles no bet)" : "";
    const said = isBlackjack ? rec.words
      : `${hand("Player", rec.player, rec.pTotal)}, ${hand("Banker", rec.banker, rec.bTotal)}: ${rec.winner}`;
    return `This is the result shoe ${shoe}${atTable} signed for round ${rec.round} of its shoe ${rec.shoe}${dummy}: ` +
      `${said}. ` +
      `It is entry ${index} of the shoe's log of ${size} entries, whose head the shoe signed and ` +
      `${cosigned.join(", ")} cosigned (by ${when}). The casino's log cannot drop or change this result without ` +
      "those witnesses noticing. It does not show that the shuffle was fair, nor which cards were in the shoe.";
  }

  const $ = (id) => document.getElementById(id);
  // A table's QR code links here with #/receipt/TABLE/SHOE/ROUND: that receipt is fetched from
  // the server that showed the code (the receipt only; the keys it is checked against are the
  // player's own, pasted below, and the check asks nothing).
  // (or #http://HOST/receipt/...: this page is another's copy, the regulator's, as it should be)
  // The link is taken as the pit wrote it, its table name percent-encoded (a `#` or `?` in a
  // name stays the name's), and only the name is decoded, to compare: a malformed one is none.
  // another code scanned into the same tab changes only the part after `#`: read it anew, so
  // no verdict stays on the page for another round than its address names
  addEventListener("hashchange", () => location.reload());
  const hash = location.hash.slice(1);
  const linked = /^(\/receipt\/|https?:\/\/[^#]*\/receipt\/)/.test(hash) ? hash : "";
  const parts = /\/receipt\/([^/]+)\/([0-9]{1,5})\/([0-9]{1,5})$/.exec(linked);
  let named = null;
  if (parts) {
    try {
      named = { table: decodeURIComponent(parts[1]), shoe: Number(parts[2]), round: Number(parts[3]) };
    } catch (e) {
      named = { table: parts[1], shoe: Number(parts[2]), round: Number(parts[3]) };
    }
  }
  let fetched = null;  // the receipt the link gave, as fetched: checked against what it named
  let players = false;  // a receipt the player chose or typed: never replaced by a late fetch
  // Served by a witness (the regulator's), the page carries its keys (#witness-keys: its
  // verifier key and each shoe's keys it vouches for) and checks a linked receipt at once: a
  // player scans a table's code and reads the verdict, with nothing to paste. Saved, the page
  // keeps those keys, and checks a receipt file with no network at all.
  const carried = document.getElementById("witness-keys");
  const keysAt = Boolean(carried);
  let keysIn = !keysAt, receiptIn = false;
  const checkWhenReady = () => { if (keysAt && keysIn && receiptIn) $("check").click(); };
  if (carried) {
    try {
      const k = JSON.parse(carried.textContent);
      $("shoe-key").value = JSON.stringify({shoes: k.shoes}, null, 1);
      $("witnesses").value = k.witness;
      keysIn = true;
    } catch (e) {
      $("verdict").textContent = "This witness's keys could not be read: paste the keys you trust.";
    }
  }
  $("receipt-file").addEventListener("change", () => {
    const file = $("receipt-file").files[0];
    if (!file) return;
    if (file.size > 65536) { $("verdict").textContent = "Not verified: that file is too large to be a receipt."; $("verdict").className = "refused"; return; }
    players = true;
    fetched = null;  // the player's own receipt: checked for what it is, not against the link
    file.text().then((text) => {
      $("receipt").value = text;
      receiptIn = true;
      if (keysAt) checkWhenReady();
      else $("verdict").textContent = "Receipt loaded: paste the keys you trust, then Check.";
    });
  });
  $("receipt").addEventListener("input", () => { players = true; fetched = null; });
  if (linked) {
    fetch(linked, {cache: "no-store"}).then(async (r) => {
      const text = await r.text();
      if (players) return;
      if (r.ok) {
        fetched = text;
        $("receipt").value = text;
        receiptIn = true;
        $("verdict").textContent = keysAt ? "Receipt loaded: checking…"
          : "Receipt loaded: paste the keys you trust, then Check.";
        checkWhenReady();
      } else {
        const said = text.trim().slice(0, 160);
        $("verdict").textContent = "No receipt yet: the casino's server has none for this round (it said: \u201c" + said + "\u201d)";
        $("verdict").className = "refused";
      }
    }).catch(() => {
      $("verdict").textContent = "The receipt could not be fetched: paste it above.";
    });
  }
  $("check").addEventListener("click", async () => {
    const out = $("verdict");
    out.className = "";
    out.textContent = "checking…";
    try {
      if (!$("receipt").value.trim()) refuse("paste the receipt first");
      if (!$("shoe-key").value.trim()) refuse("paste the shoe's public key or the shoe registry");
      const vkeys = [...new Set($("witnesses").value.split("\n").map((l) => l.trim()).filter((l) => l))];
      if (!vkeys.length) refuse("paste the verifier key of at least one witness you trust");
      const quorum = Number($("quorum").value || vkeys.length);
      if (!(quorum >= 1 && quorum <= vkeys.length)) refuse(`a quorum of ${$("quorum").value} of ${vkeys.length} witnesses: give 1 to ${vkeys.length}`);
      const asLinked = fetched !== null && $("receipt").value === fetched ? named : null;
      out.textContent = "Verified: " + await verify($("receipt").value, $("shoe-key").value, vkeys, quorum, asLinked);
      out.className = "verified";
    } catch (e) {
      out.textContent = "Not verified: " + (e instanceof Refused ? e.message : `this receipt cannot be read (${e.message || e})`);
      out.className = "refused";
    }
  });
})();
