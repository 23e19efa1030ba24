/* solid_objects live pages: keeps every {% observe %} element current.
 *
 * Loaded by {% solid_objects_script %}; no build step, no dependency. One WebSocket per page:
 * each element with a data-solid-objects-token is subscribed; a change is applied only when
 * its (instance_id, state_revision) is newer than what the element shows, compared in that
 * order: a higher instance_id is a newer incarnation of the actor (destroyed and created
 * again: its revisions start again), a lower one an older incarnation whose value arrives
 * late (a refresh fetched before the re-creation), which is ignored. After a
 * disconnect the script reconnects with a growing delay, re-subscribes and refreshes every
 * element from the observed_values endpoint (changes sent meanwhile are not replayed).
 * Invalidation-only observables are refreshed through the same endpoint.
 *
 * Each applied value dispatches a bubbling "solid-objects:change" event on the element, with
 * detail {observable, value, previous, instanceId, stateRevision, source}.
 * window.solidObjects exposes {state, connects, refreshes, received, refresh, reconnect} for
 * pages and tests (received: change messages that reached the page, applied or not).
 */
(function () {
  "use strict";
  var script = document.currentScript;
  if (!script || window.solidObjects) { return; }
  var socketPath = script.getAttribute("data-solid-objects-socket") || "/ws/solid-objects/";
  var valuesUrl = script.getAttribute("data-solid-objects-values");
  var SELECTOR = "[data-solid-objects-token]";
  var BATCH = 50;

  var socket = null;
  var attempts = 0;       // failed connections in a row (the backoff)
  var everOpened = false; // a later open is a reconnect: refresh everything
  var nextRef = 1;
  var byRef = {};         // ref -> element
  var timer = null;
  var api = { state: "connecting", connects: 0, refreshes: 0, received: 0 };

  function display(value) {
    if (value === null || value === undefined) { return ""; }
    if (typeof value === "string") { return value; }
    return JSON.stringify(value);
  }

  function position(el) {
    return [parseInt(el.getAttribute("data-solid-objects-instance") || "0", 10),
            parseInt(el.getAttribute("data-solid-objects-revision") || "0", 10)];
  }

  // (instance_id, state_revision) compared lexicographically. Instance ids only grow on a
  // database (auto-increment keys are never reused), so a higher id is a later incarnation
  // whatever its revision, and a lower one is a late value of an earlier incarnation.
  function newer(el, instanceId, revision) {
    var current = position(el);
    instanceId = Number(instanceId);
    revision = Number(revision);
    if (instanceId !== current[0]) { return instanceId > current[0]; }
    return revision > current[1];
  }

  function apply(el, value, instanceId, revision, source) {
    if (!newer(el, instanceId, revision)) { return false; }
    var previous = el.textContent;
    el.textContent = display(value);
    el.setAttribute("data-solid-objects-instance", String(instanceId));
    el.setAttribute("data-solid-objects-revision", String(revision));
    el.dispatchEvent(new CustomEvent("solid-objects:change", {
      bubbles: true,
      detail: {
        observable: el.getAttribute("data-solid-objects-observable"),
        value: value, previous: previous, instanceId: instanceId,
        stateRevision: revision, source: source
      }
    }));
    return true;
  }

  function live(el) {
    var state = el.getAttribute("data-solid-objects-state");
    return state !== "refused" && state !== "denied";
  }

  function elements() {
    return Array.prototype.filter.call(document.querySelectorAll(SELECTOR), live);
  }

  function refuse(el, reason) {
    el.setAttribute("data-solid-objects-state", "refused");
    el.setAttribute("data-solid-objects-reason", reason);
  }

  // Fetch the committed values (and fresh tokens) of elements from the JSON endpoint.
  function refresh(els) {
    els = (els || elements()).filter(live);
    if (!valuesUrl || !els.length) { return Promise.resolve(); }
    var batches = [];
    for (var i = 0; i < els.length; i += BATCH) { batches.push(els.slice(i, i + BATCH)); }
    return Promise.all(batches.map(function (batch) {
      var query = batch.map(function (el) {
        return "token=" + encodeURIComponent(el.getAttribute("data-solid-objects-token"));
      }).join("&");
      return fetch(valuesUrl + "?" + query, {
        credentials: "same-origin", headers: { "Accept": "application/json" }
      }).then(function (response) {
        if (!response.ok) { throw new Error("observed_values: HTTP " + response.status); }
        return response.json();
      }).then(function (body) {
        api.refreshes += 1;
        (body.values || []).forEach(function (item, index) {
          var el = batch[index];
          if (!el) { return; }
          if (!item.ok) {
            if (item.reason !== "expired") { refuse(el, item.reason); }
            return;
          }
          el.setAttribute("data-solid-objects-token", item.token);
          apply(el, item.value, item.instance_id, item.state_revision, "refresh");
        });
      });
    })).catch(function (error) {
      if (window.console) { console.warn("solid_objects:", error); }
    });
  }

  function subscribe(el) {
    var ref = nextRef++;
    byRef[ref] = el;
    el.setAttribute("data-solid-objects-ref", String(ref));
    socket.send(JSON.stringify({
      action: "subscribe", ref: ref, token: el.getAttribute("data-solid-objects-token")
    }));
  }

  function onMessage(event) {
    var message;
    try { message = JSON.parse(event.data); } catch (e) { return; }
    if (message.type === "subscribed") {
      var subscribed = byRef[message.ref];
      if (subscribed) { subscribed.setAttribute("data-solid-objects-state", "live"); }
    } else if (message.type === "refused") {
      var el = byRef[message.ref];
      if (!el) { return; }
      delete byRef[message.ref];
      if (message.reason === "expired" && el.getAttribute("data-solid-objects-renewed") !== "1") {
        // A page open for long: fetch a fresh token once, then subscribe again.
        el.setAttribute("data-solid-objects-renewed", "1");
        refresh([el]).then(function () {
          if (live(el) && socket && socket.readyState === WebSocket.OPEN) { subscribe(el); }
        });
      } else {
        refuse(el, message.reason || "forbidden");
      }
    } else if (message.type === "change") {
      api.received += 1;
      var targets = (message.refs || []).map(function (ref) { return byRef[ref]; })
        .filter(function (target) { return target && live(target); });
      if (message.invalidate) {
        var stale = targets.filter(function (target) {
          return newer(target, message.instance_id, message.state_revision);
        });
        if (stale.length) { refresh(stale); }
      } else {
        targets.forEach(function (target) {
          apply(target, message.value, message.instance_id, message.state_revision, "socket");
        });
      }
    }
  }

  function connect() {
    timer = null;
    var scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
    var ws = new WebSocket(scheme + window.location.host + socketPath);
    socket = ws;
    api.state = "connecting";
    ws.onopen = function () {
      attempts = 0;
      api.state = "open";
      api.connects += 1;
      byRef = {};
      elements().forEach(subscribe);
      if (everOpened) { refresh(); }
      everOpened = true;
      document.dispatchEvent(new CustomEvent("solid-objects:connected", {
        detail: { reconnect: api.connects > 1 }
      }));
    };
    ws.onmessage = onMessage;
    ws.onclose = function () {
      if (socket !== ws) { return; }
      socket = null;
      api.state = "closed";
      // 0.5 s, 1 s, 2 s ... up to 15 s, with jitter so a restarted server is not stormed.
      var delay = Math.min(15000, 500 * Math.pow(2, attempts)) * (0.75 + Math.random() / 2);
      attempts += 1;
      timer = window.setTimeout(connect, delay);
    };
  }

  api.refresh = function () { return refresh(); };
  api.reconnect = function () { // drop the socket now (pages and tests)
    if (socket) { socket.close(); }
  };
  window.solidObjects = api;

  function start() {
    if (!elements().length) { api.state = "idle"; return; }
    connect();
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
