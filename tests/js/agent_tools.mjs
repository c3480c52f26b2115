// Agent tools, unchanged, against one endpoint: Playwright MCP and
// chrome-devtools-mcp as MCP servers on stdio, driven by a minimal MCP client.
// Installed by scripts/verify-agent-tools.sh into tests/agent-tools/ (not by CI).
//
// Env: TOOL (playwright-mcp | chrome-devtools-mcp), CDP_HTTP (for
//      --cdp-endpoint / --browserUrl), CDP_WS (for --wsEndpoint), FIXTURE.
// Each operation prints `ok - …`; exits 1 on the first failure.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

import { bounded, check, env, ok, run } from './harness.mjs';

const TOOLS = path.join(path.dirname(fileURLToPath(import.meta.url)), '../agent-tools/node_modules/.bin');
const FIXTURE = env('FIXTURE');

/** An MCP server on stdio, one JSON-RPC message per line. */
class McpServer {
  constructor(command, args) {
    this.child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, CI: '1' } });
    this.waiters = new Map();
    this.nextId = 0;
    this.stderr = '';
    this.child.stderr.on('data', (d) => (this.stderr += d));
    let buffer = '';
    this.child.stdout.on('data', (data) => {
      buffer += data;
      for (let i; (i = buffer.indexOf('\n')) >= 0; ) {
        const line = buffer.slice(0, i);
        buffer = buffer.slice(i + 1);
        if (!line.trim()) continue;
        const message = JSON.parse(line);
        this.waiters.get(message.id)?.(message);
        this.waiters.delete(message.id);
      }
    });
  }

  request(method, params) {
    const id = ++this.nextId;
    const answer = new Promise((resolve) => this.waiters.set(id, resolve));
    this.child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id, method, params })}\n`);
    return bounded(answer, method, 60000);
  }

  async start() {
    await this.request('initialize', {
      protocolVersion: '2025-06-18',
      capabilities: {},
      clientInfo: { name: 'browser-relay-verify', version: '0' },
    });
    this.child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })}\n`);
  }

  /** Calls a tool: its text output (images counted), or throws with it. */
  async call(name, args = {}) {
    const answer = await this.request('tools/call', { name, arguments: args });
    if (answer.error) throw new Error(`${name}: ${JSON.stringify(answer.error)}\n${this.stderr.slice(-2000)}`);
    const content = answer.result.content ?? [];
    const text = content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
    if (answer.result.isError) throw new Error(`${name} failed: ${text}`);
    return { text, images: content.filter((c) => c.type === 'image').length };
  }

  stop() {
    this.child.kill('SIGKILL');
  }
}

/** The ref (or uid) of the snapshot line naming `label`. */
function refOf(snapshot, label, pattern) {
  const line = snapshot.split('\n').find((l) => l.includes(label));
  const ref = line?.match(pattern)?.[1];
  if (!ref) throw new Error(`no ref for ${label} in:\n${snapshot}`);
  return ref;
}

async function playwrightMcp() {
  // Its screenshots and snapshots go to a temporary folder, not the checkout.
  const outputDir = mkdtempSync(path.join(tmpdir(), 'playwright-mcp-'));
  const server = new McpServer(process.execPath, [
    path.join(TOOLS, 'playwright-mcp'),
    '--cdp-endpoint',
    env('CDP_HTTP'),
    '--output-dir',
    outputDir,
  ]);
  try {
    await server.start();
    await server.call('browser_navigate', { url: `${FIXTURE}/form.html` });
    ok('browser_navigate');
    const snapshot = (await server.call('browser_snapshot')).text;
    check(snapshot.includes('Click me'), 'browser_snapshot shows the page', snapshot.slice(0, 500));
    const ref = refOf(snapshot, 'Click me', /\[ref=([^\]]+)\]/);
    await server.call('browser_click', { element: 'Click me button', target: ref, ref });
    const after = (await server.call('browser_snapshot')).text;
    check(after.includes('clicked') && !after.includes('not clicked'), 'browser_click reached the page');
    const name = refOf(after, 'textbox "Name"', /\[ref=([^\]]+)\]/);
    await server.call('browser_type', { element: 'Name', target: name, ref: name, text: 'Ada' });
    ok('browser_type');
    await server.call('browser_evaluate', { function: '() => console.log("from-the-page")' });
    const consoleText = (await server.call('browser_console_messages')).text;
    check(consoleText.includes('from-the-page'), 'browser_console_messages', consoleText);
    const shot = await server.call('browser_take_screenshot');
    check(shot.images > 0 || /png|screenshot/i.test(shot.text), 'browser_take_screenshot', shot.text.slice(0, 300));
    const tabs = (await server.call('browser_tabs', { action: 'list' })).text;
    check(tabs.includes('form.html'), 'browser_tabs list', tabs);
    await server.call('browser_navigate_back');
    ok('browser_navigate_back');
    const requests = (await server.call('browser_network_requests')).text;
    ok(`browser_network_requests (${requests.split('\n').length} lines)`);
  } finally {
    server.stop();
    rmSync(outputDir, { recursive: true, force: true });
  }
}

async function chromeDevtoolsMcp() {
  const connect = process.env.CONNECT === 'ws' ? ['--wsEndpoint', env('CDP_WS')] : ['--browserUrl', env('CDP_HTTP')];
  const server = new McpServer(process.execPath, [
    path.join(TOOLS, 'chrome-devtools-mcp'),
    ...connect,
    '--no-usage-statistics',
    '--no-performance-crux',
  ]);
  try {
    await server.start();
    const pages = (await server.call('list_pages')).text;
    check(pages.includes(FIXTURE), 'list_pages shows the tab', pages);
    console.log(pages);
    const pageId = Number(pages.split('\n').find((l) => l.includes(FIXTURE))?.match(/(\d+):/)?.[1]);
    check(Number.isInteger(pageId), 'the tab has a page id', pages);
    await server.call('select_page', { pageId });
    await server.call('navigate_page', { pageId, type: 'url', url: `${FIXTURE}/form.html` });
    ok('navigate_page');
    const snapshot = (await server.call('take_snapshot', { pageId })).text;
    const uid = refOf(snapshot, 'Click me', /uid=(\S+)/);
    await server.call('click', { pageId, uid });
    const after = (await server.call('take_snapshot', { pageId })).text;
    check(after.includes('clicked') && !after.includes('not clicked'), 'click reached the page', after.slice(0, 800));
    await server.call('evaluate_script', { pageId, function: '() => { console.log("from-the-page"); return 1; }' });
    const consoleText = (await server.call('list_console_messages', { pageId })).text;
    check(consoleText.includes('from-the-page'), 'list_console_messages', consoleText);
    const shot = await server.call('take_screenshot', { pageId });
    check(shot.images > 0 || /screenshot/i.test(shot.text), 'take_screenshot', shot.text.slice(0, 300));
    const requests = (await server.call('list_network_requests', { pageId })).text;
    check(requests.includes('form.html'), 'list_network_requests', requests.slice(0, 500));
    await server.call('navigate_page', { pageId, type: 'back' });
    ok('navigate_page back');
  } finally {
    server.stop();
  }
}

run(async () => {
  const tool = env('TOOL');
  if (tool === 'playwright-mcp') await playwrightMcp();
  else if (tool === 'chrome-devtools-mcp') await chromeDevtoolsMcp();
  else throw new Error(`unknown TOOL ${tool}`);
});
