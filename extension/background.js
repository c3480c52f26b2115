// Browser Relay service worker: a thin shim. All logic lives in Rust (extension-wasm).
// MV3 only delivers the events that woke the worker to listeners registered
// synchronously during the first run of this script, and it kills workers that
// use top-level await or dynamic import(). So: static import, synchronous
// registration, and a queue that holds events until the WASM module is ready.
import init, * as wasm from './pkg/extension_wasm.js';

let ready = false;
const early = []; // [kind, payload] received before init() resolved, in order
const statusWaiters = []; // sendResponse callbacks for status requests made too early

function dispatch(kind, payload) {
  // One bad event must not take the worker (and every later event) down with it.
  try { wasm.dispatch(kind, payload); } catch (e) { console.error('Browser Relay: dispatch failed', kind, e); }
}

// Events received by this run of the worker, by kind: for diagnostics from
// DevTools (chrome://extensions → "service worker" → `browserRelay.events`).
self.browserRelay = { events: {} };

function queue(kind, payload) {
  self.browserRelay.events[kind] = (self.browserRelay.events[kind] ?? 0) + 1;
  if (ready) dispatch(kind, payload); else early.push([kind, payload]);
}

chrome.action.onClicked.addListener((tab) => queue('action.onClicked', { tab }));
chrome.debugger.onEvent.addListener((source, method, params) => queue('debugger.onEvent', { source, method, params }));
chrome.debugger.onDetach.addListener((source, reason) => queue('debugger.onDetach', { source, reason }));
chrome.tabs.onCreated.addListener((tab) => queue('tabs.onCreated', { tab }));
chrome.tabs.onRemoved.addListener((tabId, removeInfo) => queue('tabs.onRemoved', { tabId, removeInfo }));
chrome.tabs.onReplaced.addListener((addedTabId, removedTabId) => queue('tabs.onReplaced', { addedTabId, removedTabId }));
chrome.tabs.onUpdated.addListener((tabId, changeInfo, tab) => queue('tabs.onUpdated', { tabId, changeInfo, tab }));
// The "Browser Relay" tab group. A browser without tab groups has no
// chrome.tabGroups: sharing then works with the badge alone.
if (chrome.tabGroups) {
  chrome.tabGroups.onCreated.addListener((group) => queue('tabGroups.onCreated', { group }));
  chrome.tabGroups.onRemoved.addListener((group) => queue('tabGroups.onRemoved', { group }));
  chrome.tabGroups.onUpdated.addListener((group) => queue('tabGroups.onUpdated', { group }));
  chrome.tabGroups.onMoved.addListener((group) => queue('tabGroups.onMoved', { group }));
}
// Grants: "Share this tab with NAME" (and a handoff's "Done") on the
// toolbar button's menu, and a grant's window closing (it is never used again).
if (chrome.contextMenus) {
  chrome.contextMenus.onClicked.addListener((info, tab) => queue('contextMenus.onClicked', { info, tab }));
}
chrome.windows.onRemoved.addListener((windowId) => queue('windows.onRemoved', { windowId }));
// The person in the loop: a question's Allow or Deny, a handoff's Done.
if (chrome.notifications) {
  chrome.notifications.onButtonClicked.addListener((notificationId, buttonIndex) =>
    queue('notifications.onButtonClicked', { notificationId, buttonIndex }));
}
chrome.alarms.onAlarm.addListener((alarm) => queue('alarms.onAlarm', { alarm }));
chrome.storage.onChanged.addListener((changes, areaName) => queue('storage.onChanged', { changes, areaName }));
// Both mean "the worker is starting fresh"; the WASM side treats them alike.
chrome.runtime.onStartup.addListener(() => queue('runtime.onStartup', {}));
chrome.runtime.onInstalled.addListener(() => queue('runtime.onStartup', {}));

chrome.runtime.onMessage.addListener((message, sender, sendResponse) => {
  queue('runtime.onMessage', { message });
  if (!message || message.type !== 'status') return false;
  if (ready) sendResponse(wasm.status()); else statusWaiters.push(sendResponse);
  return true; // keeps the channel open until WASM can answer
});

init()
  .then(() => {
    wasm.start(); // exactly once, before any dispatch
    ready = true;
    for (const [kind, payload] of early.splice(0)) dispatch(kind, payload);
    for (const respond of statusWaiters.splice(0)) respond(wasm.status());
  })
  .catch((e) => console.error('Browser Relay: WASM failed to load', e));
