// The live part of the pit's pages (sabot serve), served as a file: the pages'
// Content-Security-Policy runs no inline script. Each server-sent event from the page's stream
// (the body's data-events) brings the fresh fragment, rendered and escaped on the server; the
// body's data-version is the fragment's, data-updates how many this page has taken.
"use strict";
(() => {
  const events = document.body.dataset.events;
  const live = document.getElementById("live");
  if (!events || !live) {
    return;
  }
  // the roads show their newest columns: each road scrolled to its end (a shoe's big road can
  // be wider than the screen)
  const toEnd = () => {
    for (const road of live.querySelectorAll(".road")) {
      road.scrollLeft = road.scrollWidth;
    }
  };
  toEnd();
  const source = new EventSource(events);
  source.onmessage = (e) => {
    const m = JSON.parse(e.data);
    live.innerHTML = m.html;
    toEnd();
    document.body.dataset.version = m.version;
    document.body.dataset.updates = +(document.body.dataset.updates || 0) + 1;
  };
})();
