/* agentcore-fsm run viewer (agentcore_fsm/devtools/viewer.py): no network, no framework.
 * The runs' data is the JSON document #run-data (agentcore_fsm/devtools/viewer_data.py).
 * Moving from one step to another touches only the steps in between: the path's counts are
 * kept per arrow and per state, the transcript's messages are made once, when first reached,
 * and shown or hidden by their number, and the step list shows a window around the step. */
(function () {
  "use strict";
  var ERROR = 1, TOOL = 2, APPROVAL = 4;
  var FLAGS = { error: ERROR, tool: TOOL, approval: APPROVAL };
  var WINDOW = 7;    // steps listed on each side of the current one
  var KEEP = 200;    // messages of the transcript shown at first
  var MORE = 500;    // messages more that "show earlier messages" shows

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function fmtSeconds(ms) {
    return ms < 1000 ? ms + " ms" : (ms / 1000).toFixed(3) + " s";
  }

  /* The diagram of one declaration, shown in #diagram: its states' and arrows' elements. */
  function Diagram(declaration) {
    var box = document.getElementById("diagram");
    box.textContent = "";
    var templates = document.querySelectorAll("template[data-declaration]");
    var svg = null;
    for (var i = 0; i < templates.length; i++) {
      if (templates[i].getAttribute("data-declaration") === declaration) {
        box.appendChild(document.importNode(templates[i].content, true));
        svg = box.querySelector("svg");
      }
    }
    this.svg = svg;
    this.states = {};
    this.edges = {};
    this.zoom = 1;
    if (svg) {
      var vb = svg.viewBox && svg.viewBox.baseVal;
      this.width = vb && vb.width ? vb.width : svg.getBoundingClientRect().width;
      this.height = vb && vb.height ? vb.height : svg.getBoundingClientRect().height;
      this.fit();
    }
    document.getElementById("declaration").textContent = declaration;
  }
  Diagram.prototype.state = function (name) {
    if (!(name in this.states)) this.states[name] = document.getElementById("state-" + name);
    return this.states[name];
  };
  Diagram.prototype.edge = function (id) {
    if (!(id in this.edges)) this.edges[id] = document.getElementById(id);
    return this.edges[id];
  };
  Diagram.prototype.setZoom = function (zoom) {
    if (!this.svg) return;
    this.zoom = Math.max(0.1, Math.min(4, zoom));
    this.svg.setAttribute("width", String(this.width * this.zoom));
    this.svg.setAttribute("height", String(this.height * this.zoom));
  };
  Diagram.prototype.fit = function () {
    var pane = document.getElementById("diagram");
    var room = pane.clientWidth - 12;
    this.setZoom(room > 0 && this.width > room ? room / this.width : 1);
  };

  /* One run's timeline, in `root`; `diagram` is null for a nested run's sub-timeline. */
  function Timeline(run, root, diagram) {
    this.run = run;
    this.steps = run.steps;
    this.diagram = diagram;
    var body = document.getElementById("timeline-template").content.cloneNode(true);
    root.appendChild(body);
    var box = root.lastElementChild;
    this.box = box;
    var q = function (sel) { return box.querySelector(sel); };
    this.slider = q(".slider");
    this.number = q(".step-number");
    this.stateName = q(".state-name");
    this.list = q(".steps");
    this.transcript = q(".transcript");
    this.messageCount = q(".message-count");
    this.inputKind = q(".input-kind");
    this.timing = q(".timing");
    this.usage = q(".usage");
    this.entry = q(".entry");
    this.transitions = q(".transitions");
    this.events = q(".events");
    this.nestedBox = q(".nested");
    q(".step-count").textContent = String(this.steps.length);
    this.slider.max = String(Math.max(1, this.steps.length));
    this.cur = -1;
    this.nodes = {};      // the transcript's message elements made, by number
    this.madeLo = this.madeHi = 0;    // the range of messages whose elements are made
    this.shownLo = this.shownHi = 0;  // the range of messages shown
    this.keep = KEEP;
    this.moreButton = q(".more");
    this.latest = [];     // the elements marked as the step's messages
    this.lastEdges = [];  // the arrows marked as the step's transitions
    this.edgeCount = new Int32Array(run.edges.length);
    this.stateCount = {};
    this.flagged = { error: [], tool: [], approval: [] };
    for (var i = 0; i < this.steps.length; i++) {
      var f = this.steps[i].f;
      for (var name in FLAGS) if (f & FLAGS[name]) this.flagged[name].push(i);
    }
    this.firstTs = null;
    for (i = 0; i < this.steps.length && this.firstTs === null; i++) this.firstTs = this.steps[i].ts;
    this.nestedViews = [];
    this.wire(box);
    if (diagram) this.visit(run.initial, 1);
    if (!this.steps.length) {  // a record with a header and no input yet
      this.stateName.textContent = run.initial;
      this.inputKind.textContent = "none: the record holds no input yet";
      this.number.textContent = "0";
      this.slider.disabled = true;
      for (var j = 0; j < this.jumpButtons.length; j++) this.jumpButtons[j].disabled = true;
      var start = diagram ? diagram.state(run.initial) : null;
      if (start) start.classList.add("current");
    }
  }

  Timeline.prototype.wire = function (box) {
    var self = this;
    box.querySelectorAll("[data-go]").forEach(function (button) {
      button.addEventListener("click", function () {
        var where = button.getAttribute("data-go");
        if (where === "first") self.go(0);
        else if (where === "prev") self.go(self.cur - 1);
        else if (where === "next") self.go(self.cur + 1);
        else self.go(self.steps.length - 1);
      });
    });
    box.querySelectorAll("[data-jump]").forEach(function (button) {
      button.addEventListener("click", function () {
        var target = self.jumpTarget(button.getAttribute("data-jump"));
        if (target >= 0) self.go(target);
      });
    });
    this.slider.addEventListener("input", function () { self.go(Number(self.slider.value) - 1); });
    this.list.addEventListener("click", function (event) {
      var item = event.target.closest("li[data-step]");
      if (item) self.go(Number(item.getAttribute("data-step")));
    });
    this.jumpButtons = box.querySelectorAll("[data-jump]");
    this.moreButton.addEventListener("click", function () {
      self.keep += MORE;
      self.showMessages(self.cur);
      requestAnimationFrame(function () { self.transcript.scrollTop = 0; });
    });
  };

  /* The step a jump goes to: the first error; the next tool call or approval after the
   * current step. -1: none. */
  Timeline.prototype.jumpTarget = function (kind) {
    var list = this.flagged[kind] || [];
    if (kind === "error") return list.length ? list[0] : -1;
    var lo = 0, hi = list.length;
    while (lo < hi) {
      var mid = (lo + hi) >> 1;
      if (list[mid] <= this.cur) lo = mid + 1; else hi = mid;
    }
    return lo < list.length ? list[lo] : -1;
  };

  Timeline.prototype.visit = function (state, delta) {
    var before = this.stateCount[state] || 0;
    this.stateCount[state] = before + delta;
    if (!this.diagram) return;
    var node = this.diagram.state(state);
    if (!node) return;
    if (before <= 0 && before + delta > 0) node.classList.add("visited");
    else if (before > 0 && before + delta <= 0) node.classList.remove("visited");
  };

  Timeline.prototype.apply = function (step, delta) {
    var trs = this.steps[step].tr, table = this.run.transitions;
    for (var i = 0; i < trs.length; i++) {
      var tr = table[trs[i]], edge = tr[3];
      if (edge >= 0) {
        var before = this.edgeCount[edge];
        this.edgeCount[edge] = before + delta;
        if (this.diagram && (before === 0) !== (before + delta === 0)) {
          var node = this.diagram.edge(this.run.edges[edge]);
          if (node) node.classList.toggle("taken", before === 0);
        }
      }
      this.visit(tr[2], delta);
    }
  };

  Timeline.prototype.go = function (k) {
    var n = this.steps.length;
    if (!n) return;
    k = Math.max(0, Math.min(n - 1, k));
    if (k === this.cur) return;
    var s;
    if (k > this.cur) for (s = this.cur + 1; s <= k; s++) this.apply(s, 1);
    else for (s = this.cur; s > k; s--) this.apply(s, -1);
    var previous = this.cur;
    this.cur = k;
    this.paintDiagram(previous);
    this.showMessages(k);
    this.paintStep(k);
    this.paintList(k);
    this.paintNested(k);
    if (this.onMove) this.onMove(k);
  };

  Timeline.prototype.paintDiagram = function (previous) {
    if (!this.diagram) return;
    var i;
    for (i = 0; i < this.lastEdges.length; i++) this.lastEdges[i].classList.remove("last", "incident");
    this.lastEdges = [];
    var trs = this.steps[this.cur].tr, table = this.run.transitions;
    for (i = 0; i < trs.length; i++) {
      var tr = table[trs[i]];
      var id = tr[3] >= 0 ? this.run.edges[tr[3]] : "";
      var node = id ? this.diagram.edge(id) : null;
      if (node) { node.classList.add("last"); this.lastEdges.push(node); }
      if (/-x$/.test(id)) {  // an abort or failure arrow: not drawn; its source is outlined
        var from = this.diagram.state(tr[1]);
        if (from) { from.classList.add("incident"); this.lastEdges.push(from); }
      }
    }
    var was = previous >= 0 ? this.steps[previous].s : this.run.initial;
    var old = this.diagram.state(was);
    if (old) old.classList.remove("current");
    var now = this.diagram.state(this.steps[this.cur].s);
    if (now) now.classList.add("current");
    this.scrollLater();
  };

  /* Scroll the current state and the step's last message into view once per frame, after
   * the page is drawn: stepping fast (a held arrow key) lays the page out once a frame, not
   * once a step. */
  Timeline.prototype.scrollLater = function () {
    if (this.scrollPending) return;
    this.scrollPending = true;
    var self = this;
    requestAnimationFrame(function () {
      self.scrollPending = false;
      if (self.diagram) {
        var now = self.diagram.state(self.steps[self.cur].s);
        if (now && now.scrollIntoView) now.scrollIntoView({ block: "nearest", inline: "nearest" });
      }
      var hi = self.shownHi, box = self.transcript;
      if (hi > 0 && self.nodes[hi - 1]) {
        var last = self.nodes[hi - 1];
        box.scrollTop = last.offsetTop - box.offsetTop - box.clientHeight + last.offsetHeight + 8;
      }
    });
  };

  Timeline.prototype.messageNode = function (m) {
    var node = el("div", "msg " + m.r + (m.x ? " bad" : ""));
    var role = m.r === "toolResult" ? "tool result: " + m.n : m.r;
    if (m.s && m.s !== "stop") role += " (" + m.s + ")";
    node.appendChild(el("span", "role", role));
    if (m.t) node.appendChild(document.createTextNode(m.t));
    if (m.c) {
      for (var i = 0; i < m.c.length; i++) {
        node.appendChild(el("span", "call", "→ " + m.c[i][0] + " " + m.c[i][2] + "  [" + m.c[i][1] + "]"));
      }
    }
    if (typeof m.x === "string") node.appendChild(el("span", "call error", "error: " + m.x));
    node.setAttribute("data-step", String(m.k));
    return node;
  };

  /* Show the transcript as it stood after step k: its last `keep` messages (the button
   * above them shows more). The elements of a contiguous range of messages are kept in the
   * page, made when first needed; a move touches only the messages that come into or go out
   * of view, and a jump far away starts the range afresh. */
  Timeline.prototype.showMessages = function (k) {
    var hi = this.steps[k].m, lo = Math.max(0, hi - this.keep), msgs = this.run.messages, i;
    var box = this.transcript;
    if (hi <= this.madeLo || lo >= this.madeHi || this.madeLo === this.madeHi) {
      while (box.firstChild) box.removeChild(box.firstChild);
      this.nodes = {};
      this.madeLo = this.madeHi = this.shownLo = this.shownHi = lo;
    }
    for (i = this.madeLo - 1; i >= lo; i--) {
      this.nodes[i] = this.messageNode(msgs[i]);
      this.nodes[i].hidden = true;
      box.insertBefore(this.nodes[i], box.firstChild);
    }
    this.madeLo = Math.min(this.madeLo, lo);
    for (i = this.madeHi; i < hi; i++) {
      this.nodes[i] = this.messageNode(msgs[i]);
      this.nodes[i].hidden = true;
      box.appendChild(this.nodes[i]);
    }
    this.madeHi = Math.max(this.madeHi, hi);
    for (i = this.shownLo; i < this.shownHi; i++) if (i < lo || i >= hi) this.nodes[i].hidden = true;
    for (i = lo; i < hi; i++) if (i < this.shownLo || i >= this.shownHi) this.nodes[i].hidden = false;
    this.shownLo = lo;
    this.shownHi = hi;
    for (i = 0; i < this.latest.length; i++) this.latest[i].classList.remove("latest");
    this.latest = [];
    var from = Math.max(lo, k > 0 ? this.steps[k - 1].m : 0);
    for (i = from; i < hi; i++) { this.nodes[i].classList.add("latest"); this.latest.push(this.nodes[i]); }
    var earlier = this.run.earlier ? " + " + this.run.earlier + " earlier in the context" : "";
    this.messageCount.textContent = "(" + hi + " messages" + earlier + ")";
    this.moreButton.hidden = lo === 0;
    this.moreButton.textContent = "show " + Math.min(lo, MORE) + " earlier messages (" + lo + " not shown)";
    this.scrollLater();
  };

  Timeline.prototype.paintStep = function (k) {
    var step = this.steps[k], i;
    this.number.textContent = String(k + 1);
    this.slider.value = String(k + 1);
    this.stateName.textContent = step.s;
    this.inputKind.textContent = step.i;
    var first = this.firstTs;
    if (step.ts !== null && first !== null) {
      var text = "+" + fmtSeconds(step.ts - first) + " from the first step";
      var prev = k > 0 ? this.steps[k - 1].ts : null;
      if (prev !== null) text += " · " + fmtSeconds(step.ts - prev) + " after the previous";
      this.timing.textContent = text;
    } else {
      this.timing.textContent = "not recorded";
    }
    var u = step.u;
    this.usage.textContent = "input " + u[0] + " · output " + u[1] + " · total " + u[2] + " tokens · cost " + u[3];
    this.entry.textContent = step.e || "(no fields)";
    this.transitions.textContent = "";
    for (i = 0; i < step.tr.length; i++) {
      var t = this.run.transitions[step.tr[i]];
      this.transitions.appendChild(el("li", null, t[1] + " —" + t[0] + "→ " + t[2]));
    }
    if (!step.tr.length) this.transitions.appendChild(el("li", "muted", "none"));
    this.events.textContent = "";
    for (i = 0; i < step.ev.length; i++) this.events.appendChild(el("li", null, this.run.labels[step.ev[i]]));
    if (!step.ev.length) this.events.appendChild(el("li", "muted", "none"));
    for (i = 0; i < this.jumpButtons.length; i++) {
      var b = this.jumpButtons[i];
      b.disabled = this.jumpTarget(b.getAttribute("data-jump")) < 0;
    }
  };

  Timeline.prototype.paintList = function (k) {
    var n = this.steps.length;
    var lo = Math.max(0, k - WINDOW), hi = Math.min(n, k + WINDOW + 1);
    this.list.textContent = "";
    for (var i = lo; i < hi; i++) {
      var step = this.steps[i];
      var marks = (step.f & ERROR ? " · error" : "") + (step.f & TOOL ? " · tool call" : "") +
        (step.f & APPROVAL ? " · approval" : "");
      var item = el("li", (i === k ? "here" : "") + (step.f & ERROR ? " flag-error" : ""),
        "#" + (i + 1) + "  " + step.i + "  → " + step.s + marks);
      item.setAttribute("data-step", String(i));
      this.list.appendChild(item);
    }
  };

  /* The nested runs that began by step k, each an expandable sub-timeline. */
  Timeline.prototype.paintNested = function (k) {
    var nested = this.run.nested;
    for (var i = 0; i < nested.length; i++) {
      var view = this.nestedViews[i];
      if (!view && nested[i].step <= k) view = this.nestedViews[i] = this.nestedView(nested[i]);
      if (view) view.hidden = nested[i].step > k;
    }
  };

  Timeline.prototype.nestedView = function (child) {
    var details = el("details", "nested-run");
    var run = child.run;
    details.setAttribute("data-run", run.id);
    details.appendChild(el("summary", null, "nested run " + (run.label ? run.label + ": " : "") + run.id + " (began at step " +
      (child.step + 1) + ", " + run.steps.length + " steps, " + (run.end || "not finished") + ")"));
    var made = false;
    details.addEventListener("toggle", function () {
      if (!details.open || made) return;
      made = true;
      var sub = new Timeline(run, details, null);
      sub.go(sub.steps.length - 1);
    });
    this.nestedBox.appendChild(details);
    return details;
  };

  function stepFromHash() {
    var match = /step=(\d+)/.exec(location.hash || "");
    return match ? Number(match[1]) - 1 : null;
  }
  function runFromHash() {
    var match = /run=([^&]+)/.exec(location.hash || "");
    return match ? decodeURIComponent(match[1]) : null;
  }

  var runs = JSON.parse(document.getElementById("run-data").textContent);
  var pane = document.getElementById("timeline-pane");
  var current = null;

  function show(index, step) {
    var run = runs[index];
    pane.textContent = "";
    var diagram = new Diagram(run.declaration);
    current = new Timeline(run, pane, diagram);
    current.onMove = function (k) {
      try {
        history.replaceState(null, "", "#run=" + encodeURIComponent(run.id) + "&step=" + (k + 1));
      } catch (e) { /* some browsers refuse it for files */ }
    };
    document.getElementById("run-title").textContent = "run " + run.id;
    document.getElementById("run-meta").textContent = run.declaration + " · model " +
      (run.model || "?") + " · " + run.steps.length + " steps · " +
      (run.end ? "ended: " + run.end : "not finished") + " · final state " + run.state;
    current.go(step === null || step === undefined ? run.steps.length - 1 : step);
  }

  var pick = document.getElementById("run-pick");
  if (runs.length > 1) {
    document.getElementById("run-pick-label").hidden = false;
    runs.forEach(function (run, i) {
      var option = el("option", null, run.id + " (" + run.steps.length + " steps)");
      option.value = String(i);
      pick.appendChild(option);
    });
    pick.addEventListener("change", function () { show(Number(pick.value), null); });
  }
  document.getElementById("zoom-in").addEventListener("click", function () {
    if (current && current.diagram) current.diagram.setZoom(current.diagram.zoom * 1.25);
  });
  document.getElementById("zoom-out").addEventListener("click", function () {
    if (current && current.diagram) current.diagram.setZoom(current.diagram.zoom / 1.25);
  });
  document.getElementById("zoom-fit").addEventListener("click", function () {
    if (current && current.diagram) current.diagram.fit();
  });
  document.addEventListener("keydown", function (event) {
    if (!current || event.altKey || event.ctrlKey || event.metaKey) return;
    var tag = event.target && event.target.tagName;
    if (tag === "INPUT" || tag === "SELECT" || tag === "TEXTAREA") return;
    if (event.target && event.target.closest && event.target.closest("details.nested-run")) return;
    var moves = { ArrowRight: 1, ArrowLeft: -1, PageDown: 10, PageUp: -10 };
    if (event.key in moves) current.go(current.cur + moves[event.key]);
    else if (event.key === "Home") current.go(0);
    else if (event.key === "End") current.go(current.steps.length - 1);
    else return;
    event.preventDefault();
  });

  var wanted = runFromHash(), start = 0;
  for (var r = 0; r < runs.length; r++) if (runs[r].id === wanted) start = r;
  if (runs.length > 1) pick.value = String(start);
  if (runs.length) show(start, stepFromHash());
  window.viewer = {
    runs: runs,
    loadMs: performance.now(),
    timeline: function () { return current; },
    go: function (k) { current.go(k); return current.cur; },
    show: function (i) { pick.value = String(i); show(i, null); }
  };
})();
