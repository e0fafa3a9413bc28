// The live part of the pit's pages (sabot serve), served as a file: the pages'
// Content-Security-Policy runs no inline script. Each server-sent event from the page's stream
// (the body's data-events) brings the fresh fragment, rendered and escaped on the server; the
// body's data-version is the fragment's, data-updates how many this page has taken. The server
// sends one at least every second (its clock): a page that has had none for STALE_MS says so
// (data-stale on the body; on the pit's pages a line naming the server's time it last heard),
// so a page whose server or network has gone quiet never passes for a quiet table.
"use strict";
(() => {
  const STALE_MS = 5000;
  const events = document.body.dataset.events;
  const live = document.getElementById("live");
  if (!events || !live) {
    return;
  }
  // the roads show their newest columns: each road scrolled to its end (a shoe's big road can
  // be wider than the screen), then back to the start of the first column in sight, so none
  // shows cut in half (the road's end has a column's room for it, pages.css)
  const toEnd = () => {
    for (const road of live.querySelectorAll(".road")) {
      road.scrollLeft = road.scrollWidth;
      const at = road.scrollLeft;
      if (!at) {
        continue;
      }
      const origin = road.getBoundingClientRect().left + road.clientLeft - at;
      for (const col of road.children) {
        const box = col.getBoundingClientRect();
        if (box.right - origin > at) {  // the first column in sight: shown whole, from its start
          road.scrollLeft = Math.floor(box.left - origin);
          break;
        }
      }
    }
  };
  toEnd();
  addEventListener("resize", toEnd);  // a column's width follows the window's
  let heard = Date.now();
  let heardClock = (document.getElementById("clock") || {}).textContent || "";
  const stale = () => {
    const quiet = Date.now() - heard > STALE_MS;
    let line = document.getElementById("stale");
    if (!quiet) {
      delete document.body.dataset.stale;
      if (line) {
        line.remove();
      }
      return;
    }
    document.body.dataset.stale = "1";
    if (document.body.classList.contains("scoreboard")) {
      return; // the players' display dims (pages.css); the pit's staff read the line
    }
    if (!line) {
      line = document.createElement("p");
      line.id = "stale";
      line.className = "alarm banner";
      live.before(line);
    }
    const secs = Math.round((Date.now() - heard) / 1000);
    line.textContent = `NO WORD FROM THE SERVER for ${secs} s (its time was ${heardClock || "?"}` +
      "): what this page shows may be out of date";
    aging();
  };
  // While the server is quiet its ages would stand still: each table's newest stored frame and
  // state keep aging here, on this computer's clock from the server's last word (its data-now).
  const ago = (seconds) => {
    const t = Math.max(0, Math.floor(seconds));
    if (t < 60) {
      return `${t} s`;
    }
    if (t < 3600) {
      return `${Math.floor(t / 60)} min`;
    }
    return `${Math.floor(t / 3600)} h ${String(Math.floor(t % 3600 / 60)).padStart(2, "0")} min`;
  };
  const aging = () => {
    const said = +((document.getElementById("clock") || {dataset: {}}).dataset.now || 0);
    if (!said) {
      return;
    }
    const now = said + (Date.now() - heard) / 1000;
    for (const age of live.querySelectorAll(".age[data-frame-at]")) {
      const old = ago(now - age.dataset.frameAt);
      age.textContent = `newest frame this page knows of stored ${old} ago`;
    }
    for (const since of live.querySelectorAll("[data-since] .since")) {
      const at = since.closest("[data-since]").dataset.since;
      since.textContent = `${since.textContent.split(",")[0]}, ${ago(now - at)}`;
    }
  };
  setInterval(stale, 1000);
  // An operator filling a form (a note, a dealer to sign on) or pressing a button is not
  // interrupted: the fragment waits until they are done, its clock alone shown meanwhile.
  let pressing = false;
  let pending = null;
  let waitingSince = Date.now(); // an operator who walks away mid-form holds no page for long
  const busy = () => {
    const a = document.activeElement;
    return pressing || (a && a !== document.body && live.contains(a) && a.closest("form"));
  };
  // what the operator was filling in, found again in the new fragment by its form's data-key
  const restore = (was) => {
    if (!was) {
      return;
    }
    const form = [...live.querySelectorAll("form[data-key]")].find(
      (f) => f.dataset.key === was.key);
    const field = form && form.elements.namedItem(was.name);
    if (field && "value" in field) {
      field.value = was.value;
      field.focus();
    }
  };
  const apply = (m) => {
    const a = document.activeElement;
    const form = a && a.form;
    const was = form && form.dataset.key && a.name ?
      {key: form.dataset.key, name: a.name, value: a.value} : null;
    live.innerHTML = m.html;
    restore(was);
    toEnd();
    heardClock = (document.getElementById("clock") || {}).textContent || heardClock;
    document.body.dataset.version = m.version;
    document.body.dataset.updates = +(document.body.dataset.updates || 0) + 1;
  };
  const later = () => {
    setTimeout(() => {
      if (pending && !busy()) {
        const m = pending;
        pending = null;
        waitingSince = Date.now();
        apply(m);
      }
    }, 300);
  };
  live.addEventListener("pointerdown", () => { pressing = true; });
  document.addEventListener("pointerup", () => { pressing = false; later(); });
  live.addEventListener("focusout", later);
  const source = new EventSource(events);
  source.onmessage = (e) => {
    const m = JSON.parse(e.data);
    heard = Date.now();
    if (busy() && Date.now() - waitingSince < 15000) {
      pending = m;
      const next = document.createElement("template");
      next.innerHTML = m.html;
      const now = next.content.getElementById("clock");
      const clock = document.getElementById("clock");
      if (now && clock) {
        clock.textContent = heardClock = now.textContent;
        clock.dataset.now = now.dataset.now || "";
      }
    } else {
      pending = null;
      waitingSince = Date.now();
      apply(m);
    }
    stale();
  };
})();
