// Dev harness for relay/src/control/snapshot.js (the in-page `ai` snapshot walker).
//
//   cd tests && node js/snapshot_dev.mjs [--print] [--full] [--no-bench | --bench-only] [fixture ...]
// (a fixture is a name under tests/fixtures/snap, e.g. `form`, or any http URL)
//
// Serves tests/fixtures on 127.0.0.1:0 (and the same server as http://localhost:PORT, a
// second site for cross-site iframes), launches the system Chromium headless (never
// downloads one) and, for each fixture under tests/fixtures/snap:
//   - runs the walker in an isolated world "browser-relay" through a CDP session, exactly
//     as the Rust engine does (Runtime.callFunctionOn with the file as functionDeclaration),
//     splicing the snapshots of out-of-process iframes under their `- iframe` line;
//   - parity with Chrome: every non-ignored node of Accessibility.getFullAXTree (main frame,
//     in-process child frames, out-of-process frames through their own session) whose role
//     is interactive is resolved into the world, `describe`d and compared (role, name,
//     hidden) and must be a ref of the snapshot; every ref must be such an AX node with the
//     same role and name. Chrome's internal role names are mapped as documented at the top
//     of snapshot.js. Nodes the walker cannot see by design (user-agent / closed shadow
//     trees, the options of a single <select>'s popup) are counted as skipped.
//   - contract checks (ops, options, errors, coordinates, fallback);
//   - timing on big.html and article.html against Playwright's ariaSnapshot().
// Prints every mismatch; exits 1 if there is any mismatch or failed check.
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const FIXTURES = path.resolve(HERE, '../fixtures');
const SCRIPT_PATH = path.resolve(HERE, '../../relay/src/control/snapshot.js');
const SCRIPT = fs.readFileSync(SCRIPT_PATH, 'utf8');
const DESCRIBE = `function(){ return (${SCRIPT}).call(null, 'describe', this) }`;
const WORLD = 'browser-relay';
const CHROMIUM = process.env.CHROMIUM || '/usr/lib/chromium/chromium';

const argv = process.argv.slice(2);
const PRINT = argv.includes('--print');
const FULL = argv.includes('--full');
const BENCH = !argv.includes('--no-bench');
const BENCH_ONLY = argv.includes('--bench-only');
const ONLY = argv.filter((a) => !a.startsWith('--'));
const FIXTURE_NAMES = ['form', 'landmarks', 'table', 'hidden', 'frames', 'inner', 'big', 'article'];

const INTERACTIVE = new Set(['button', 'link', 'textbox', 'checkbox', 'radio', 'combobox', 'listbox',
  'menuitem', 'menuitemcheckbox', 'menuitemradio', 'option', 'searchbox', 'slider', 'spinbutton',
  'switch', 'tab', 'treeitem']);

let failures = 0;
function fail(what) {
  failures++;
  console.log(`  FAIL ${what}`);
}
function check(cond, what, detail) {
  if (cond) console.log(`  ok   ${what}`);
  else fail(`${what}${detail === undefined ? '' : ` (got ${JSON.stringify(detail)})`}`);
}

// ---------------------------------------------------------------- static server
const TYPES = { '.html': 'text/html; charset=utf-8', '.txt': 'text/plain', '.js': 'text/javascript' };
function startServer() {
  const server = http.createServer((req, res) => {
    const rel = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    const file = path.resolve(FIXTURES, '.' + rel);
    if (!file.startsWith(FIXTURES + path.sep)) {
      res.writeHead(403).end();
      return;
    }
    fs.readFile(file, (err, data) => {
      if (err) {
        res.writeHead(404).end('not found');
        return;
      }
      res.writeHead(200, { 'content-type': TYPES[path.extname(file)] || 'application/octet-stream' });
      res.end(data);
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

// ---------------------------------------------------------------- CDP helpers
async function makeWorld(session, frameId) {
  const { executionContextId } = await session.send('Page.createIsolatedWorld', { frameId, worldName: WORLD });
  return executionContextId;
}

async function call(session, contextId, op, arg, byValue = true) {
  const reply = await session.send('Runtime.callFunctionOn', {
    functionDeclaration: SCRIPT,
    executionContextId: contextId,
    arguments: [{ value: op }, { value: arg === undefined ? null : arg }],
    returnByValue: byValue,
    awaitPromise: true,
  });
  if (reply.exceptionDetails) {
    const d = reply.exceptionDetails;
    throw new Error(`${op}: ${(d.exception && d.exception.description) || d.text}`);
  }
  return byValue ? reply.result.value : reply.result;
}

async function describeNode(session, contextId, backendNodeId) {
  const { object } = await session.send('DOM.resolveNode', { backendNodeId, executionContextId: contextId });
  try {
    const reply = await session.send('Runtime.callFunctionOn', {
      objectId: object.objectId, functionDeclaration: DESCRIBE, returnByValue: true,
    });
    if (reply.exceptionDetails) throw new Error(`describe: ${reply.exceptionDetails.exception?.description}`);
    return reply.result.value;
  } finally {
    await session.send('Runtime.releaseObject', { objectId: object.objectId }).catch(() => {});
  }
}

async function backendOfRef(session, contextId, ref) {
  const obj = await call(session, contextId, 'element', { ref }, false);
  try {
    const { node } = await session.send('DOM.describeNode', { objectId: obj.objectId });
    return node.backendNodeId;
  } finally {
    await session.send('Runtime.releaseObject', { objectId: obj.objectId }).catch(() => {});
  }
}

function frameIds(tree, out = []) {
  out.push({ id: tree.frame.id, url: tree.frame.url });
  for (const c of tree.childFrames || []) frameIds(c, out);
  return out;
}

// Out-of-process iframes: frame id -> their own CDP session.
async function oopifSessions(context, page) {
  const map = new Map();
  for (const f of page.frames()) {
    if (f === page.mainFrame()) continue;
    let s;
    try {
      s = await context.newCDPSession(f);
    } catch {
      continue; // in-process frame
    }
    const { frameTree } = await s.send('Page.getFrameTree');
    map.set(frameTree.frame.id, s);
  }
  return map;
}

// ---------------------------------------------------------------- Chrome roles
function cut(s) {
  return s.length > 100 ? s.slice(0, 100) + '…' : s;
}

function prop(node, name) {
  const p = (node.properties || []).find((x) => x.name === name);
  return p ? p.value.value : undefined;
}

// Chrome sometimes keeps one space at either end of a name (text before an aria-hidden or
// display:none sibling: "Text "); the walker always trims, so compare trimmed names.
function chromeNameOf(node) {
  return ((node.name && node.name.value) || '').replace(/^[ \t\n\r\f]+|[ \t\n\r\f]+$/g, '');
}

function chromeRole(node, byId) {
  const r = node.role ? node.role.value : '';
  switch (r) {
    case 'image': return 'img';
    case 'DisclosureTriangle': return 'button';
    case 'ColorWell': case 'Date': case 'DateTime': case 'InputTime': return 'textbox';
    case 'Iframe': case 'IframePresentational': return 'iframe';
    case 'Figcaption': return 'caption';
    case 'DescriptionList': return 'list';
    case 'LayoutTable': return 'table';
    case 'LayoutTableRow': return 'row';
    case 'LayoutTableCell': return 'cell';
    case 'generic': {
      if (prop(node, 'editable') === 'richtext') {
        let parent = node.parentId ? byId.get(node.parentId) : null;
        while (parent && parent.ignored) parent = parent.parentId ? byId.get(parent.parentId) : null;
        if (!parent || prop(parent, 'editable') === undefined) return 'textbox';
      }
      return r;
    }
  }
  return r;
}

// ---------------------------------------------------------------- snapshot with splicing
// Like the engine: snapshot a frame, then the iframes the walker could not enter, spliced
// (one level of out-of-process frames, enough for the fixtures).
async function snapshotTab(context, page, session, opts, units) {
  const { frameTree } = await session.send('Page.getFrameTree');
  const mainWorld = await makeWorld(session, frameTree.frame.id);
  const oopifs = await oopifSessions(context, page);
  const top = await call(session, mainWorld, 'snapshot', opts);
  if (units) units.push({ session, world: mainWorld, refs: top.refs, frameId: frameTree.frame.id, main: true });
  let next = (opts.refStart || 1) + top.refs.length;
  const allRefs = [...top.refs];
  const inserts = new Map();
  for (let i = 0; i < (top.frames || []).length; i++) {
    const f = top.frames[i];
    const obj = await call(session, mainWorld, 'frameElement', i, false);
    const { node } = await session.send('DOM.describeNode', { objectId: obj.objectId });
    const childSession = oopifs.get(node.frameId);
    if (!childSession) {
      inserts.set(f.line, [`${'  '.repeat(f.depth)}- text: (frame ${node.frameId} not reachable)`]);
      continue;
    }
    const { frameTree: ct } = await childSession.send('Page.getFrameTree');
    const world = await makeWorld(childSession, ct.frame.id);
    const childOpts = { ...opts, refStart: next, selector: null };
    if (typeof opts.maxDepth === 'number') childOpts.maxDepth = opts.maxDepth - f.depth;
    const sub = await call(childSession, world, 'snapshot', childOpts);
    if (units) units.push({ session: childSession, world, refs: sub.refs, frameId: ct.frame.id, main: false });
    next += sub.refs.length;
    allRefs.push(...sub.refs);
    const indent = opts.interactive ? '' : '  '.repeat(f.depth);
    inserts.set(f.line, sub.lines.map((l) => indent + l));
  }
  const lines = [];
  top.lines.forEach((line, i) => {
    const ins = inserts.get(i);
    lines.push(ins && ins.length && !line.endsWith(':') ? line + ':' : line);
    if (ins) lines.push(...ins);
  });
  return { ...top, lines, refs: allRefs, mainWorld };
}

// ---------------------------------------------------------------- parity
async function parity(context, page, cdp) {
  const units = [];
  const snap = await snapshotTab(context, page, cdp, { limit: 1e9, refStart: 1 }, units);
  const mismatches = [];
  let skipped = 0;
  const skippedWhy = new Map();
  const skip = (why) => {
    skipped++;
    skippedWhy.set(why, (skippedWhy.get(why) || 0) + 1);
  };
  // Backend ids of the refs, per session.
  const refByBackend = new Map(); // session -> Map(backendId -> ref)
  for (const u of units) {
    const m = refByBackend.get(u.session) || new Map();
    refByBackend.set(u.session, m);
    for (const r of u.refs) m.set(await backendOfRef(u.session, u.world, r.ref), r);
  }
  // AX trees: main session frames (in-process) and each OOPIF session.
  const axBySession = new Map(); // session -> Map(backendId -> {node, byId})
  const frameUnits = [];
  const { frameTree } = await cdp.send('Page.getFrameTree');
  const oopifIds = new Set(units.filter((u) => !u.main).map((u) => u.frameId));
  for (const f of frameIds(frameTree)) {
    if (oopifIds.has(f.id)) continue;
    frameUnits.push({ session: cdp, frameId: f.id });
  }
  for (const u of units) if (!u.main) frameUnits.push({ session: u.session, frameId: u.frameId });
  for (const fu of frameUnits) {
    let nodes;
    try {
      ({ nodes } = await fu.session.send('Accessibility.getFullAXTree', { frameId: fu.frameId }));
    } catch (e) {
      mismatches.push(`frame ${fu.frameId}: getFullAXTree failed: ${e.message}`);
      continue;
    }
    const world = await makeWorld(fu.session, fu.frameId);
    const byId = new Map(nodes.map((n) => [n.nodeId, n]));
    const ax = axBySession.get(fu.session) || new Map();
    axBySession.set(fu.session, ax);
    const refs = refByBackend.get(fu.session) || new Map();
    for (const n of nodes) {
      if (n.backendDOMNodeId) ax.set(n.backendDOMNodeId, { node: n, byId });
    }
    for (const n of nodes) {
      if (n.ignored || !n.backendDOMNodeId) continue;
      const role = chromeRole(n, byId);
      if (!INTERACTIVE.has(role)) continue;
      const chromeName = chromeNameOf(n);
      let d;
      try {
        d = await describeNode(fu.session, world, n.backendDOMNodeId);
      } catch (e) {
        mismatches.push(`${role} "${chromeName}": describe failed: ${e.message}`);
        continue;
      }
      if (d.unreachable) {
        skip(`user-agent/closed shadow: ${role}`);
        continue;
      }
      let inPopup = false;
      for (let a = n.parentId ? byId.get(n.parentId) : null; a; a = a.parentId ? byId.get(a.parentId) : null) {
        if (a.role && a.role.value === 'MenuListPopup') inPopup = true;
      }
      if (role === 'option' && inPopup) {
        if (d.role !== 'option' || d.name !== chromeName) mismatches.push(`popup option "${chromeName}": describe gave ${d.role} "${d.name}"`);
        skip('option of a single <select> popup');
        continue;
      }
      const where = `#${n.backendDOMNodeId}`;
      if (d.role !== role) mismatches.push(`${where} role: chrome ${role} "${chromeName}", walker ${d.role} "${d.name}"`);
      else if (d.name !== chromeName) mismatches.push(`${where} name: ${role} chrome ${JSON.stringify(chromeName)}, walker ${JSON.stringify(d.name)}`);
      if (d.hidden) mismatches.push(`${where} ${role} "${chromeName}": walker says hidden, chrome shows it`);
      else if (!refs.has(n.backendDOMNodeId)) mismatches.push(`${where} ${role} "${chromeName}": not a ref in the snapshot`);
    }
  }
  // Reverse: every ref is an AX node with the same role and name.
  for (const [session, refs] of refByBackend) {
    const ax = axBySession.get(session) || new Map();
    for (const [backend, r] of refs) {
      const hit = ax.get(backend);
      if (!hit) {
        mismatches.push(`${r.ref} ${r.role} "${r.name}": no AX node`);
        continue;
      }
      const role = chromeRole(hit.node, hit.byId);
      const nm = cut(chromeNameOf(hit.node));
      if (hit.node.ignored) mismatches.push(`${r.ref} ${r.role} "${r.name}": chrome ignores it`);
      else if (role !== r.role || nm !== r.name) mismatches.push(`${r.ref} ${r.role} "${r.name}": chrome ${role} "${nm}"`);
    }
  }
  return { snap, mismatches, skipped, skippedWhy };
}

// ---------------------------------------------------------------- contract checks
function near(a, b, tol = 1) {
  return Math.abs(a - b) <= tol;
}

async function contractChecks(context, page, base, alt) {
  console.log('\n== contract checks');
  const url = `${base}/snap/form.html`;
  await page.goto(url);
  let cdp = await context.newCDPSession(page);
  let { frameTree } = await cdp.send('Page.getFrameTree');
  let world = await makeWorld(cdp, frameTree.frame.id);

  let r = await call(cdp, world, 'snapshot', { selector: '#nope', limit: 100 });
  check(r.error === "no element matches selector '#nope'" && r.lines.length === 0, 'selector without match gives an error', r.error);
  r = await call(cdp, world, 'snapshot', { selector: '[[[' });
  check(typeof r.error === 'string' && r.error.startsWith("invalid selector '[[['"), 'invalid selector gives an error', r.error);
  r = await call(cdp, world, 'snapshot', { selector: 'form', limit: 1e9, refStart: 1 });
  check(r.lines[0] === '- form "Sign up":', 'selector: the element is the first line', r.lines[0]);
  r = await call(cdp, world, 'snapshot', { limit: 1e9, refStart: 10 });
  check(r.refs[0] && r.refs[0].ref === 'e10', 'refStart numbers the first ref', r.refs[0]);
  const full = r;
  r = await call(cdp, world, 'snapshot', { limit: 5, refStart: 1 });
  check(r.nodes === 5 && r.limitHit && r.lines.length >= 5, 'limit stops after 5 nodes', { nodes: r.nodes, limitHit: r.limitHit });
  r = await call(cdp, world, 'snapshot', { limit: 1e9, maxDepth: 0, refStart: 1 });
  check(r.depthCut > 0 && r.lines.every((l) => l.startsWith('- ')), 'maxDepth 0 keeps only top lines', { depthCut: r.depthCut });
  r = await call(cdp, world, 'snapshot', { limit: 1e9, interactive: true, refStart: 1 });
  check(r.lines.length === r.refs.length && r.lines.every((l) => /^- \S.*\[ref=e\d+\]/.test(l)), 'interactive: one flat ref line per ref', r.lines.slice(0, 3));
  check(r.refs.length === full.refs.length, 'interactive has the same refs as the full snapshot', [r.refs.length, full.refs.length]);
  for (const name of ['landmarks', 'table', 'article']) {
    const other = await context.newPage();
    await other.goto(`${base}/snap/${name}.html`);
    const s2 = await context.newCDPSession(other);
    const { frameTree: t2 } = await s2.send('Page.getFrameTree');
    const w2 = await makeWorld(s2, t2.frame.id);
    const all = await call(s2, w2, 'snapshot', { limit: 1e9, refStart: 1 });
    const compact = await call(s2, w2, 'snapshot', { limit: 1e9, compact: true, refStart: 1 });
    check(compact.refs.length === all.refs.length && compact.lines.length < all.lines.length &&
      !compact.lines.some((l) => /- (list|listitem|group|rowgroup)(:|$)/.test(l.trim())),
    `compact keeps every ref in fewer lines (${name})`, [compact.lines.length, all.lines.length]);
    if (PRINT && name === 'landmarks') for (const l of compact.lines) console.log('  | ' + l);
    await other.close();
  }

  // resolve: coordinates agree with Playwright's bounding box.
  r = await call(cdp, world, 'snapshot', { limit: 1e9, refStart: 1 });
  const plain = r.refs.find((x) => x.name === 'Plain button');
  let box = await call(cdp, world, 'resolve', { ref: plain.ref });
  let pw = await page.getByRole('button', { name: 'Plain button' }).boundingBox();
  check(near(box.x, pw.x) && near(box.y, pw.y) && near(box.width, pw.width) && box.fallback === false,
    'resolve: border box equals Playwright boundingBox', { box, pw });
  // fallback after the element is replaced by an identical one
  await page.evaluate(() => {
    const b = [...document.querySelectorAll('button')].find((x) => x.textContent === 'Plain button');
    b.replaceWith(b.cloneNode(true));
  });
  box = await call(cdp, world, 'resolve', { ref: plain.ref, role: plain.role, name: plain.name, nth: plain.nth });
  check(box.fallback === true && near(box.x, pw.x) && near(box.y, pw.y), 'resolve falls back to role+name+nth', box);
  const el = await call(cdp, world, 'element', { ref: plain.ref }, false);
  check(el.subtype === 'node' && !!el.objectId, 'element returns a node', el.subtype);
  box = await call(cdp, world, 'resolve', { ref: 'e9999' });
  check(box.error === 'unknown', 'unknown ref', box);
  await page.evaluate(() => {
    const b = [...document.querySelectorAll('button')].find((x) => x.textContent === 'Plain button');
    b.remove();
  });
  box = await call(cdp, world, 'resolve', { ref: plain.ref, role: plain.role, name: plain.name, nth: plain.nth });
  check(box.error === 'stale', 'removed element is stale', box);
  let threw = '';
  try {
    await call(cdp, world, 'element', { ref: plain.ref }, false);
  } catch (e) {
    threw = e.message;
  }
  check(/stale/.test(threw), 'element throws stale', threw);
  // a hidden element
  const email = r.refs.find((x) => x.role === 'textbox' && x.name === 'Email');
  await page.evaluate(() => { document.getElementById('t-email').style.display = 'none'; });
  box = await call(cdp, world, 'resolve', { ref: email.ref });
  check(box.hidden === true, 'resolve reports hidden for display:none', box);
  // describe on body
  const { root } = await cdp.send('DOM.getDocument', { depth: 1 });
  const bodyNode = await cdp.send('DOM.querySelector', { nodeId: root.nodeId, selector: 'body' });
  const { node: bodyDesc } = await cdp.send('DOM.describeNode', { nodeId: bodyNode.nodeId });
  const d = await describeNode(cdp, world, bodyDesc.backendNodeId);
  check(d.role === 'generic' && d.hidden === false, 'describe(body)', d);
  // selectorBox and querySelector
  const sb = await call(cdp, world, 'selectorBox', 'h1');
  const pwh = await page.locator('h1').boundingBox();
  check(sb && near(sb.x, pwh.x) && near(sb.y, pwh.y), 'selectorBox', sb);
  check((await call(cdp, world, 'selectorBox', '#nope')) === null, 'selectorBox without match is null');
  check(typeof (await call(cdp, world, 'selectorBox', '[[['))?.error === 'string', 'selectorBox invalid selector');
  const qs = await call(cdp, world, 'querySelector', 'form', false);
  check(qs.subtype === 'node', 'querySelector returns a node', qs);
  // fresh world after navigation: stale
  await page.goto(url);
  ({ frameTree } = await cdp.send('Page.getFrameTree'));
  world = await makeWorld(cdp, frameTree.frame.id);
  box = await call(cdp, world, 'resolve', { ref: plain.ref, role: plain.role, name: plain.name, nth: plain.nth });
  check(box.error === 'stale', 'fresh world after navigation: stale', box);
  await cdp.detach();

  // frames: a ref inside the same-origin iframe comes back in the top viewport.
  await page.goto(`${base}/snap/frames.html?alt=${alt}`);
  await waitFrames(page);
  cdp = await context.newCDPSession(page);
  ({ frameTree } = await cdp.send('Page.getFrameTree'));
  world = await makeWorld(cdp, frameTree.frame.id);
  r = await call(cdp, world, 'snapshot', { limit: 1e9, refStart: 1 });
  const inner = r.refs.find((x) => x.name === 'Inner button');
  check(!!inner, 'same-origin iframe content has refs in the parent snapshot');
  box = await call(cdp, world, 'resolve', { ref: inner.ref });
  pw = await page.frameLocator('#same').getByRole('button', { name: 'Inner button' }).boundingBox();
  check(near(box.x, pw.x) && near(box.y, pw.y) && near(box.width, pw.width), 'resolve in a same-origin iframe: parent viewport coordinates', { box, pw });
  // the iframe navigates (same URL): the old document is gone, the fallback finds the new button
  await page.evaluate(() => new Promise((resolve) => {
    const f = document.getElementById('same');
    f.addEventListener('load', resolve, { once: true });
    f.src = f.src;
  }));
  box = await call(cdp, world, 'resolve', { ref: inner.ref, role: inner.role, name: inner.name, nth: inner.nth });
  check(box.fallback === true && near(box.x, pw.x) && near(box.y, pw.y), 'resolve after the iframe reloaded falls back', box);
  check(r.frames.length === 1, 'one cross-origin frame listed', r.frames);
  const fe = await call(cdp, world, 'frameElement', 0, false);
  const { node: feNode } = await cdp.send('DOM.describeNode', { objectId: fe.objectId });
  check(feNode.nodeName === 'IFRAME' && /Cross site/.test(r.lines[r.frames[0].line]), 'frameElement returns the cross-origin iframe', r.lines[r.frames[0].line]);
  r = await call(cdp, world, 'snapshot', { limit: 1e9, refStart: 1, interactive: true });
  check(r.frames.length === 1 && r.lines[r.frames[0].line].startsWith('- iframe "Cross site"'), 'interactive keeps the cross-origin iframe line', r.frames);
  await cdp.detach();

  // scrolling: the last button of big.html is scrolled into view.
  await page.goto(`${base}/snap/big.html`);
  cdp = await context.newCDPSession(page);
  ({ frameTree } = await cdp.send('Page.getFrameTree'));
  world = await makeWorld(cdp, frameTree.frame.id);
  r = await call(cdp, world, 'snapshot', { limit: 1e9, refStart: 1, interactive: true });
  const last = r.refs.filter((x) => x.role === 'button').pop();
  box = await call(cdp, world, 'resolve', { ref: last.ref });
  const vp = page.viewportSize();
  check(box.y >= 0 && box.y + box.height <= vp.height && box.x >= 0, 'resolve scrolls a far element into view', box);
  pw = await page.getByRole('button', { name: last.name, exact: true }).boundingBox();
  check(near(box.y, pw.y) && near(box.x, pw.x), 'scrolled box equals Playwright boundingBox', { box, pw });
  await cdp.detach();
}

async function waitFrames(page) {
  for (const f of page.frames()) await f.waitForLoadState('load').catch(() => {});
  await page.waitForTimeout(100);
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

async function bench(context, page, base, name) {
  // Cold: the first call after the page loaded (Chrome builds lazy caches then).
  await page.goto(`${base}/snap/${name}.html`);
  let cdp = await context.newCDPSession(page);
  let { frameTree } = await cdp.send('Page.getFrameTree');
  let world = await makeWorld(cdp, frameTree.frame.id);
  let t = performance.now();
  await call(cdp, world, 'snapshot', { limit: 1e9, refStart: 1 });
  const coldOurs = performance.now() - t;
  await cdp.detach();
  await page.goto(`${base}/snap/${name}.html`);
  t = performance.now();
  await page.locator('body').ariaSnapshot();
  const coldPw = performance.now() - t;

  await page.goto(`${base}/snap/${name}.html`);
  cdp = await context.newCDPSession(page);
  ({ frameTree } = await cdp.send('Page.getFrameTree'));
  world = await makeWorld(cdp, frameTree.frame.id);
  const ours = (opts) => async () => call(cdp, world, 'snapshot', opts);
  const loc = page.locator('body');
  const theirs = async () => loc.ariaSnapshot();
  // Interleaved (ours, Playwright, ours, …) so that load from other processes hits both alike.
  const jobs = {
    full: ours({ limit: 1e9, refStart: 1 }),
    dflt: ours({ limit: 5000, refStart: 1 }),
    inter: ours({ limit: 1e9, refStart: 1, interactive: true }),
    pw: theirs,
  };
  const times = {};
  const outs = {};
  for (const k of Object.keys(jobs)) {
    times[k] = [];
    outs[k] = await jobs[k](); // warm-up
  }
  for (let i = 0; i < 5; i++) {
    for (const k of Object.keys(jobs)) {
      const t0 = performance.now();
      outs[k] = await jobs[k]();
      times[k].push(performance.now() - t0);
    }
  }
  const full = { ms: median(times.full), out: outs.full };
  const dflt = { ms: median(times.dflt), out: outs.dflt };
  const inter = { ms: median(times.inter), out: outs.inter };
  const pwMs = median(times.pw);
  const pwOut = outs.pw;
  await cdp.detach();
  console.log(`\n== timing ${name}.html (median of 5 interleaved runs after a warm-up, wall clock incl. CDP round trip)`);
  console.log(`  walker full        ${full.ms.toFixed(1)} ms  (${full.out.nodes} nodes, ${full.out.refs.length} refs, ${full.out.lines.length} lines)`);
  console.log(`  walker limit=5000  ${dflt.ms.toFixed(1)} ms  (limitHit=${dflt.out.limitHit})`);
  console.log(`  walker interactive ${inter.ms.toFixed(1)} ms  (${inter.out.lines.length} lines)`);
  console.log(`  playwright ariaSnapshot ${pwMs.toFixed(1)} ms  (${pwOut.split('\n').length} lines)`);
  console.log(`  ratio walker/playwright ${(full.ms / pwMs).toFixed(2)}  (target <= 0.5)`);
  console.log(`  cold (first call after load): walker ${coldOurs.toFixed(1)} ms, playwright ${coldPw.toFixed(1)} ms`);
  return { ours: full.ms, pw: pwMs };
}

// ---------------------------------------------------------------- main
async function main() {
  const server = await startServer();
  const port = server.address().port;
  const base = `http://127.0.0.1:${port}`;
  const alt = `http://localhost:${port}`;
  let browser;
  let mismatchTotal = 0;
  try {
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'], headless: true });
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    const names = BENCH_ONLY ? [] : ONLY.length ? ONLY : FIXTURE_NAMES;
    const summary = [];
    for (const name of names) {
      const url = name.startsWith('http') ? name : `${base}/snap/${name}.html${name === 'frames' ? `?alt=${alt}` : ''}`;
      await page.goto(url);
      await waitFrames(page);
      const cdp = await context.newCDPSession(page);
      const { snap, mismatches, skipped, skippedWhy } = await parity(context, page, cdp);
      await cdp.detach();
      console.log(`\n== ${name}: ${snap.lines.length} lines, ${snap.nodes} nodes, ${snap.refs.length} refs, ${mismatches.length} mismatches, ${skipped} skipped`);
      for (const [why, n] of skippedWhy) console.log(`  skipped ${n}: ${why}`);
      for (const m of mismatches) console.log(`  MISMATCH ${m}`);
      if (PRINT) {
        const lines = FULL || snap.lines.length <= 80 ? snap.lines : snap.lines.slice(0, 60);
        for (const l of lines) console.log('  | ' + l);
        if (lines.length < snap.lines.length) console.log(`  | … ${snap.lines.length - lines.length} more lines (--full)`);
      }
      mismatchTotal += mismatches.length;
      summary.push(`${name}: ${mismatches.length} mismatches, ${skipped} skipped`);
    }
    if (!ONLY.length && !BENCH_ONLY) await contractChecks(context, page, base, alt);
    if (BENCH && !ONLY.length) {
      await bench(context, page, base, 'big');
      await bench(context, page, base, 'article');
    }
    console.log('\n== summary');
    for (const s of summary) console.log('  ' + s);
    console.log(`  contract check failures: ${failures}`);
  } finally {
    if (browser) await browser.close();
    server.close();
  }
  if (mismatchTotal || failures) process.exitCode = 1;
}

main().catch((e) => {
  console.error(e);
  process.exitCode = 1;
});
