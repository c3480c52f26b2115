/*
 * In-page accessibility snapshot walker for the control API ("ai" snapshot).
 *
 * This whole file is ONE function expression. Rust sends it verbatim as the
 * `functionDeclaration` of `Runtime.callFunctionOn`, in the isolated world
 * "browser-relay" of a frame, with `arguments: [{value: op}, {value: arg}]`.
 * The source is re-sent on every call, so everything that must survive between
 * calls lives on `globalThis.__browserRelayState`:
 *   refs: Map<ref, Element>, meta: Map<ref, {role, name, nth, scope, optionsMax}> (scope: the
 *   selector of the snapshot that issued the ref, and its options per select; the resolve
 *   fallback walks the same),
 *   frames: Element[] (the iframes of the last snapshot the walker could not enter).
 * The file is kept pure ASCII (a non-ASCII character makes V8 scan the whole source as a
 * two-byte string on every call).
 * Besides, `globalThis.__browserRelayCode = {source, run}` caches the built implementation
 * (keyed by this exact source text) so that the helpers are not compiled again on every call;
 * it is not state (a world without it behaves the same, only slower).
 *
 * Ops
 *   snapshot(opts)   opts = {interactive, compact, lean, maxDepth, limit, refStart, selector,
 *                            keep, optionsMax}
 *       -> {lines, refs: [{ref, role, name, nth}], frames: [{line, depth}], nodes, limitHit,
 *           depthCut, refNext, viewLine, error?}
 *       `viewLine`: on a page scrolled down, the index of the first line whose element starts
 *       in or below the viewport's top (null when not scrolled, or none does).
 *       Without `keep`, replaces the previous refs of this world and numbers refs from
 *       refStart. With `keep` (the numbers of the refs the engine still has for this frame: a
 *       partial snapshot merges), the world drops every other ref it held, an element that
 *       still has a kept ref shows that ref again, and new refs are numbered from refStart
 *       (never a number the world still holds). `refNext` is the number after the last new
 *       ref. `optionsMax`: options listed per <select> (default 25; null: all). `nodes` counts
 *       emitted node lines
 *       (element lines and `- text:` lines; `- /url:` lines are properties, not nodes).
 *       `limit` caps `nodes`; `limitHit` is set when something was left out because of it.
 *       `depthCut` counts node lines left out because they were deeper than `maxDepth`.
 *       `frames[i]` is an iframe the walker could not enter (cross-origin): `line` is the
 *       index of its `- iframe "TITLE"` line (written without a trailing ':'; add it when
 *       splicing non-empty content), `depth` the indentation depth of its content.
 *       Such frames are only listed when their content depth is <= maxDepth and the
 *       limit was not hit. An unknown/invalid selector returns `error` and no lines;
 *       a selector matching a hidden element returns no lines and no error.
 *   resolve({ref, role, name, nth})
 *       -> {x, y, width, height, fallback, hidden?} | {error: "stale" | "unknown"}
 *       Border box in CSS px in the viewport of the frame this world belongs to (offsets of
 *       same-origin frames the snapshot entered are added). Scrolls into view
 *       (block/inline center, instant) first when the box is not fully inside every
 *       viewport on the way up. `hidden: true` when the element has no box (then no scroll).
 *       Fallback (the mapped element is disconnected, or its iframe was removed or
 *       navigated): the nth (0-based) element with exactly that role and name (names compared
 *       after the 100-char cut) in a fresh walk of the same scope (the selector of the snapshot
 *       that issued the ref if it still matches, else the document); role/name/nth come from
 *       the argument, else from the stored meta. The element found replaces the mapping (`fallback: true`).
 *   element(same arg) -> Element (call with returnByValue: false); throws Error("stale" |
 *       "unknown").
 *   frameElement(index) -> __browserRelayState.frames[index] (or null).
 *   querySelector(selector) -> document.querySelector(selector) (returnByValue: false; throws
 *       on an invalid selector). Used by the engine to find an <iframe> by selector.
 *   selectorBox(selector) -> {x, y, width, height} | null (no match) | {error} (invalid
 *       selector): like resolve, for the first element matching a CSS selector.
 *   actionable({ref, role, name, nth, enabled, stable, hitTest, focus}) -> Promise of
 *       {state: "ok", x, y, width, height, fallback, focus?} | {state: "hidden" | "disabled" |
 *       "unstable"} | {state: "covered", by: "<div class=...>"} | {error}: the checks before an
 *       action (see the function); the box is the first line box's, in this world's viewport.
 *   focusForTyping(ref arg) -> {kind: "input" | "textarea" | "contenteditable" | "other", type,
 *       focused}: focuses and selects the content. setValue({...ref, value}) for pickers;
 *       selectOptions({...ref, values}); checkedState(ref arg) -> {checked}.
 *   waitFor({text | textGone | selector, timeoutMs}) -> Promise of {met}.
 *   showLabels({max}) -> {labels, skipped}; hideLabels(): the orange ref overlay (a label
 *       above its box, below it when the box touches the top, inside it when neither fits,
 *       never past an edge of the viewport).
 *   watchChanges() -> true: starts noting what changes in this frame's document (nodes added
 *       or removed, text, and the attributes that show or hide: hidden, open, style, class,
 *       aria-*), for the changedParts after an action.
 *   changedParts({max}) -> {parts: ["dialog \"Sign in\" (new)", "main"], more}: stops
 *       noting; each change's nearest part an agent would name (a dialog, an alert, a
 *       landmark, a form, a named region, a table, a list, a menu, a tab panel; else the
 *       page), inner parts over the parts that hold them, in document order, at most `max`
 *       (`more`: how many others). A part the action added says `(new)`, one it hid or
 *       closed `(gone)`. [] when nothing changed or nothing was being noted.
 *   describe(element) -> {role, name, hidden, unreachable}. `role` is the snapshot role,
 *       or "generic" / "none" for nodes the snapshot does not emit as a line; `name` is
 *       the full (uncut) accessible name; `hidden` is whether the snapshot would omit it;
 *       `unreachable` is true for nodes in user-agent or closed shadow trees (the walker
 *       cannot see those). Call as
 *       `function(){ return (<this file>).call(null, 'describe', this) }`.
 *
 * Output format (modelled on Playwright's aria snapshot; the lean form differs as under Modes)
 *   - ROLE "NAME" [checked|checked=mixed] [disabled] [expanded|expanded=false] [level=N]
 *     [pressed|pressed=mixed] [selected] [required] [readonly] [ref=eN]
 *   (unchecked, unpressed and unselected are the absence of the mark, as in Playwright;
 *   readonly: a readonly text field, or aria-readonly="true")
 *   Name JSON-quoted, omitted when empty; whitespace collapsed; names longer than 100
 *   characters are cut to 100 + U+2026 "..." (the refs list carries the cut name too).
 *   Children follow, indented by 2 spaces per depth, after a trailing ':' (lean: 1 space, no ':'). When the only
 *   content is text it goes inline (`- paragraph: Hello`). Text among other children is
 *   `- text: ...`; runs of text separated only by inline elements (span, b, em, code, ...)
 *   are merged into one text line; block-level wrappers (div, label with display:block,
 *   ...) end a text run.
 *   Values go inline: native textbox / searchbox / spinbutton / slider / input combobox show
 *   their value (passwords as one U+2022 bullet per character), <progress value>/<meter> and
 *   ARIA slider / spinbutton / progressbar / meter their value (aria-valuetext, else
 *   aria-valuenow), a file input (a button) its chosen files (`files: a.pdf, b.txt`) or
 *   `no file chosen`; values are whitespace-collapsed and cut at 200 characters.
 *   A <select> lists its options (and optgroups as groups) as children: the first optionsMax
 *   options, then only the selected ones, then `- text: ... N more options` (U+2026). A listbox
 *   <select>'s options have refs; a combobox <select>'s do not (its popup is drawn by the
 *   browser: choose with the `select` action on the combobox's ref), and in interactive mode,
 *   or when maxDepth cuts its options, it shows its selected option's label inline instead.
 *   Links get a `- /url: HREF` child (the attribute value as written) before their other
 *   children.
 *   Roles that take their name from content do not repeat their text: when the name came
 *   from content all text children are dropped (non-text children such as an img or a
 *   nested link stay); otherwise a sole text child equal to the name is dropped.
 *   Roles whose children are presentational in ARIA (button, checkbox, img, menuitemcheckbox,
 *   menuitemradio, meter, option, progressbar, radio, scrollbar, separator, slider, switch,
 *   tab) keep only child subtrees that contain a ref.
 *   Refs (`[ref=eN]`, N counted from refStart in output order, or kept: see `keep`) are given
 *   only to the roles button, link, textbox, checkbox, radio, combobox, listbox, menuitem,
 *   menuitemcheckbox, menuitemradio, option (not the options of a combobox <select>),
 *   searchbox, slider, spinbutton, switch, tab, treeitem.
 *   nth = index among the refs of this snapshot with the same role and (cut) name.
 *   Not emitted as lines (children lifted one level): generic, none, presentation, and the
 *   inline/formatting or Chrome-internal roles strong, emphasis, code, time, mark,
 *   subscript, superscript, deletion, insertion, abbr, label, legend, sectionheader,
 *   sectionfooter. The document itself is not a line: depth 0 = children of <body>.
 *   Same-origin iframes: `- iframe "TITLE":` with the frame's body content one level
 *   deeper. Cross-origin iframes: the line only (see `frames`).
 *   Not walked: script, style, template, noscript, head and metadata elements; the contents
 *   of img, svg (an <svg> is `img` when it has a <title>/aria name and skipped otherwise),
 *   video, audio, canvas, object, embed, input, textarea, select (handled as above).
 *
 * Modes
 *   lean (the default form; the engine passes it unless asked for the full tree): compact
 *     (below) always, then a name is not said twice (an only child that says nothing but its
 *     parent's name goes: `- cell "x"` over `- paragraph: x`; a parent whose only child is a
 *     ref'd element of the same name leaves the name to the child), and rendered with one
 *     space a level and no `- ` bullet (the indentation alone says the depth), no ':' before
 *     children, a ref as `[eN]`, and a link's address on its own line after ` -> `
 *     (`link "News" [e2] -> /news`; a link's other content as child lines). Prose goes on
 *     one line: a node whose children are text with links between them (never two links in a
 *     row) has them inline, each link as `[name](address) [eN]`
 *     (`paragraph: Some text with [a link](#more) [e10] inside.`), when the link has a name
 *     without brackets, an address without spaces, and no state, value or content. The
 *     interactive mode's lines read the same (`button "Go" [e1]`).
 *     A name that came from content (a cell, a heading) says what its children say: the
 *     children go when nothing below has a ref, an address, a value or a frame; else the name
 *     goes when the children say all of it (no text was left out for the name), and a name cut
 *     at 100 characters goes, the children staying with their text. An unnamed child whose
 *     only content is its parent's name goes (a table's caption).
 *   interactive: only ref'd elements, one per line with value inline, no text, no /url, no
 *     indentation; every iframe (entered or not) also gets a `- iframe "TITLE"` line, followed
 *     by its content (cross-origin content is spliced after it). maxDepth applies to the
 *     structural depth a node would have in the full snapshot, and frames[].depth is that
 *     structural depth too (for the child frame's maxDepth), not an indentation.
 *   compact (applied before maxDepth/limit):
 *     1. unnamed, non-ref nodes with role group, list, listitem, rowgroup or form, and
 *        unnamed paragraphs left without text of their own (after rule 3), are removed and
 *        their children lifted into their place;
 *     2. then every node without ref, name or value whose children (after compaction) are
 *        all gone is removed, except table cells/headers (to keep columns aligned) and
 *        iframes (splice points);
 *     3. a text line equal to the name of its parent or of the node right before or after it
 *        is removed (a label's text next to its control, a legend inside its group).
 *   maxDepth: node lines deeper than maxDepth (depth 0 = top) are left out and counted in
 *     depthCut; a node whose children were all cut is written without ':' (a link keeps its
 *     `- /url:` line, which is a property, not a node).
 *   limit: emission stops after `limit` node lines (limitHit = true).
 *   selector: only document.querySelector(selector) and its subtree (the element is the
 *     first line at depth 0 if it has an emitted role, else its children are).
 *
 * Hidden content (omitted): display:none; visibility:hidden/collapse on the node itself
 * (its visibility:visible descendants are shown); aria-hidden="true" and inert subtrees;
 * nodes without a box according to Element.checkVisibility() unless display:contents
 * (covers closed <details> content, content-visibility:hidden / hidden=until-found, and
 * light-DOM children not assigned to a slot of a closed shadow root); everything outside an
 * open modal <dialog> (:modal) in the same document. opacity:0 and zero-size or off-screen
 * elements are kept (Chrome keeps them too). getComputedStyle is read once per element
 * per call (cached).
 *
 * Roles: explicit role attribute (first recognised token; "image" = "img"; none/presentation
 * ignored on focusable elements or elements with aria-label/labelledby/describedby; option
 * and treeitem only inside listbox/group/tree/select/datalist/combobox, like Chrome) else the
 * implicit HTML-AAM role. Mapping of Chrome-internal roles (Accessibility.getFullAXTree):
 *   image -> img; DisclosureTriangle (<summary>) -> button, with [expanded]/[expanded=false];
 *   Date, DateTime, InputTime, ColorWell (date/time/datetime-local/month/week/color inputs)
 *   -> textbox (value inline; like Playwright); Iframe -> iframe; editable root (contenteditable,
 *   Chrome "generic" with editable=richtext) -> textbox; Figcaption -> caption;
 *   DescriptionList -> list (dt -> term, dd -> definition); LayoutTable / LayoutTableRow /
 *   LayoutTableCell -> table / row / cell; input type=file -> button; LabelText, Legend,
 *   ListMarker, LineBreak, Abbr, sectionheader, sectionfooter, StaticText, InlineTextBox,
 *   MenuListPopup, RootWebArea -> not emitted.
 *
 * Names: accname 1.2 as Chrome implements it: aria-labelledby (ids in order; a hidden
 * referenced element contributes all its text, a visible one only its visible text; a
 * self-reference contributes the control's value), aria-label, host language (input
 * button/submit/reset value or "Submit"/"Reset", image input alt or "Submit", file input
 * labels or "Choose File(s)", <label>s (visible ones only, the labelled control itself
 * excluded, embedded controls contribute their value), fieldset legend, table caption,
 * img/area alt, svg <title>, optgroup label, option label, iframe title), content for
 * name-from-content roles (embedded textbox/select/range values, img alt, aria-label and
 * aria-labelledby of descendants; descendants with container roles such as group, menu,
 * listbox, table, tree, toolbar, dialog contribute only their aria/native name, not their
 * content; a space is put around elements that are not display:inline and around replaced
 * or attribute-named elements; text-transform upper/lower/capitalize applied), then title,
 * then placeholder / aria-placeholder. Names are trimmed and whitespace-collapsed.
 *
 * Known differences from Chrome's tree (found with tests/js/snapshot_dev.mjs):
 *   - Closed shadow roots are invisible to page scripts: their content is missing and only
 *     light-DOM children assigned to their slots appear (as if the host had no shadow root;
 *     unassigned light children have no box and are skipped). Chrome shows the shadow content.
 *   - User-agent shadow parts (the spinbuttons and picker buttons inside date/time inputs)
 *     are not listed; the control is one textbox with its value inline. The options of a
 *     single <select>'s popup are listed without refs (Chrome gives them nodes).
 *   - CSS ::before/::after content is ignored in names and text (Chrome includes it, e.g.
 *     icon-font glyphs or "PRE " in `button::before{content:"PRE "}`).
 *   - Internal role mappings as listed above (Chrome reports the internal names).
 *   - Inline formatting roles (strong, emphasis, code, ...) and Chrome's sectionheader /
 *     sectionfooter (header/footer inside sectioning content) are not emitted.
 *   - aria-owns is not applied (children stay in DOM order); canvas fallback content and
 *     <area> links of image maps are not listed.
 *   - Elements outside a modal dialog are hidden only when the dialog is in the same
 *     document; popovers/top-layer elements next to a modal are hidden too.
 *   - Chrome sometimes keeps one space at the start or end of a name (text followed by an
 *     aria-hidden or display:none sibling gives "Text "); names here are always trimmed.
 *   - Text comes from the DOM with whitespace collapsed, not from layout: white-space:pre
 *     line breaks become spaces.
 *   - Chrome's layout-table heuristic (LayoutTable* roles for tables it deems presentational)
 *     is not applied: every <table> is a table. [popover] elements (Chrome: group) and
 *     <header>/<footer> inside sectioning content (Chrome: sectionheader/sectionfooter) are
 *     not emitted as lines.
 */
function browserRelay(op, arg) {
  'use strict';

  const G = globalThis;
  // The engine re-sends this source with every call. Compiling all the helpers again each
  // time costs a few ms, so the world keeps the built implementation, keyed by the exact
  // source text (a different relay version rebuilds it).
  const source = String(browserRelay);
  const code = G.__browserRelayCode;
  if (code && code.source === source) return code.run(op, arg);
  const run = makeRun();
  G.__browserRelayCode = { source, run };
  return run(op, arg);

  function makeRun() {
    const INTERACTIVE = new Set(['button', 'link', 'textbox', 'checkbox', 'radio', 'combobox',
      'listbox', 'menuitem', 'menuitemcheckbox', 'menuitemradio', 'option', 'searchbox', 'slider',
      'spinbutton', 'switch', 'tab', 'treeitem']);
    const NAME_FROM_CONTENT = new Set(['button', 'cell', 'checkbox', 'columnheader', 'gridcell',
      'heading', 'link', 'menuitem', 'menuitemcheckbox', 'menuitemradio', 'option', 'radio',
      'rowheader', 'switch', 'tab', 'tooltip', 'treeitem', 'term']);
    const PRES_CHILDREN = new Set(['button', 'checkbox', 'img', 'menuitemcheckbox', 'menuitemradio',
      'meter', 'option', 'progressbar', 'radio', 'scrollbar', 'separator', 'slider', 'switch', 'tab']);
    const SKIP_ROLES = new Set(['generic', 'none', 'presentation', 'strong', 'emphasis', 'code',
      'time', 'mark', 'subscript', 'superscript', 'deletion', 'insertion', 'abbr', 'label',
      'legend', 'sectionheader', 'sectionfooter']);
    const ARIA_ROLES = new Set(['alert', 'alertdialog', 'application', 'article', 'banner',
      'blockquote', 'button', 'caption', 'cell', 'checkbox', 'code', 'columnheader', 'combobox',
      'comment', 'complementary', 'contentinfo', 'definition', 'deletion', 'dialog', 'directory',
      'document', 'emphasis', 'feed', 'figure', 'form', 'generic', 'grid', 'gridcell', 'group',
      'heading', 'img', 'insertion', 'link', 'list', 'listbox', 'listitem', 'log', 'main', 'mark',
      'marquee', 'math', 'menu', 'menubar', 'menuitem', 'menuitemcheckbox', 'menuitemradio',
      'meter', 'navigation', 'none', 'note', 'option', 'paragraph', 'presentation', 'progressbar',
      'radio', 'radiogroup', 'region', 'row', 'rowgroup', 'rowheader', 'scrollbar', 'search',
      'searchbox', 'separator', 'slider', 'spinbutton', 'status', 'strong', 'subscript',
      'suggestion', 'superscript', 'switch', 'tab', 'table', 'tablist', 'tabpanel', 'term',
      'textbox', 'time', 'timer', 'toolbar', 'tooltip', 'tree', 'treegrid', 'treeitem']);
    const SKIP_TAGS = new Set(['script', 'style', 'template', 'noscript', 'head', 'title', 'meta',
      'link', 'base']);
    const LEAF_TAGS = new Set(['img', 'svg', 'video', 'audio', 'canvas', 'object', 'embed', 'input',
      'textarea', 'math', 'area', 'map']);
    // Elements Chrome separates from neighbouring text in a name even when display:inline.
    const REPLACED = new Set(['img', 'svg', 'input', 'select', 'textarea', 'button', 'video', 'audio',
      'canvas', 'iframe', 'object', 'embed', 'meter', 'progress']);
    const CHECKABLE = new Set(['checkbox', 'radio', 'switch', 'menuitemcheckbox', 'menuitemradio',
      'treeitem']);
    const SELECTABLE = new Set(['tab', 'option', 'row', 'gridcell', 'treeitem', 'columnheader',
      'rowheader']);
    // Roles whose content never counts towards an ancestor's name (Chrome's
    // SupportsNameFromContents(recursive) is false for them: containers of many objects).
    // Their own aria-label / native name still counts. <details> is "group" here but Chrome's
    // internal Details role does contribute, so the tag is checked too.
    const NO_CONTENT_IN_NAME = new Set(['alert', 'alertdialog', 'application', 'article', 'banner',
      'blockquote', 'complementary', 'contentinfo', 'dialog', 'document', 'feed', 'figure', 'form',
      'grid', 'group', 'iframe', 'img', 'listbox', 'log', 'main', 'marquee', 'math', 'menu',
      'menubar', 'meter', 'navigation', 'note', 'progressbar', 'radiogroup', 'scrollbar', 'search',
      'searchbox', 'slider', 'spinbutton', 'status', 'table', 'tablist', 'tabpanel', 'textbox',
      'timer', 'toolbar', 'tree', 'treegrid', 'combobox']);
    // ...of which these are still set apart by spaces, like controls.
    const SPACED_NO_CONTENT = new Set(['listbox', 'tree', 'combobox', 'textbox', 'searchbox',
      'slider', 'spinbutton', 'meter', 'progressbar', 'scrollbar']);
    const COMPACT_LIFT = new Set(['group', 'list', 'listitem', 'rowgroup', 'form']);
    const COMPACT_KEEP = new Set(['cell', 'gridcell', 'columnheader', 'rowheader', 'iframe']);
    const TEXT_INPUTS = new Set(['text', 'email', 'tel', 'url', 'search', '']);
    const INPUT_VALUE_ROLES = new Set(['textbox', 'searchbox', 'spinbutton', 'slider', 'combobox']);
    // Where a native readonly attribute means something (it is ignored on checkboxes, ranges...).
    const READONLY_ROLES = new Set(['textbox', 'searchbox', 'spinbutton', 'combobox']);
    // Options listed per <select> (then only the selected ones, and a count of the rest).
    const OPTIONS_MAX = 25;
    const OPTION_CONTEXT = '[role~="listbox"],[role~="group"],[role~="combobox"],select,datalist,optgroup';
    // header/footer inside these are not banner/contentinfo.
    const SECTIONING = 'article,aside,main,nav,section,[role~="article"],[role~="complementary"],[role~="main"],' +
      '[role~="navigation"],[role~="region"]';
    const NAME_MAX = 100;
    const VALUE_MAX = 200;

    // ---------------------------------------------------------------- per-call caches
    // (reset by run() at the start of every call: the DOM may have changed in between)
    let styleCache;
    let roleCache;
    let nameCache;
    let tableRoleCache;
    let docCtxCache;
    let labelMaps;
    let optionsMax = OPTIONS_MAX; // set by each snapshot (a search lists every option)

    function collapse(s) {
      return s.replace(/[ \t\n\r\f]+/g, ' ').replace(/^ | $/g, '');
    }
    function cut(s, max) {
      return s.length > max ? s.slice(0, max) + '\u2026' : s;
    }

    function st(el) {
      let s = styleCache.get(el);
      if (s === undefined) {
        const view = el.ownerDocument && el.ownerDocument.defaultView;
        const cs = view ? view.getComputedStyle(el) : null;
        s = cs ? { cs, d: cs.display, v: cs.visibility, cv: undefined, tt: undefined }
          : { cs: null, d: 'none', v: 'hidden', cv: 'hidden', tt: 'none' };
        styleCache.set(el, s);
      }
      return s;
    }

    // Whether text directly inside `el` is rendered (content-visibility:hidden skips it; its
    // element children have no box and fail checkVisibility anyway). Read lazily: only for
    // elements that hold text.
    function textShown(el) {
      const s = st(el);
      if (s.v !== 'visible') return false;
      if (s.cv === undefined) s.cv = s.cs ? s.cs.contentVisibility : 'hidden';
      return s.cv !== 'hidden';
    }

    function transformText(data, el) {
      if (el.nodeType !== 1) return data;
      const s = st(el);
      if (s.tt === undefined) s.tt = s.cs ? s.cs.textTransform : 'none';
      switch (s.tt) {
        case 'none': return data;
        case 'uppercase': return data.toUpperCase();
        case 'lowercase': return data.toLowerCase();
        case 'capitalize': return data.replace(/(^|[\s(\-"'])(\p{L})/gu, (m, a, b) => a + b.toUpperCase());
        default: return data;
      }
    }

    // Children in the flat tree: an open shadow root replaces the light children; a slot in a
    // shadow tree yields its assigned nodes (or its fallback content).
    function kids(node) {
      if (node.nodeType === 1) {
        const sr = node.shadowRoot;
        if (sr) return sr.childNodes;
        if (node.localName === 'slot') {
          const root = node.getRootNode();
          if (root.nodeType === 11 && root.host) return node.assignedNodes({ flatten: true });
        }
      }
      return node.childNodes;
    }

    // Parent in the flat tree, within one document.
    function flatParent(n) {
      const slot = n.assignedSlot;
      if (slot) return slot;
      const p = n.parentNode;
      if (p && p.nodeType === 11) return p.host || null;
      return p && p.nodeType === 1 ? p : null;
    }

    // Conditions on the element itself that hide it and its whole subtree.
    function hiddenSelf(el, s) {
      if (s.d === 'none') return true;
      if (el.getAttribute('aria-hidden') === 'true') return true;
      if (el.inert === true) return true;
      if (s.d !== 'contents' && el.checkVisibility && !el.checkVisibility()) return true;
      return false;
    }

    function docCtx(doc) {
      let c = docCtxCache.get(doc);
      if (c) return c;
      c = { modal: null, anc: null };
      try {
        const open = doc.querySelectorAll('dialog[open]');
        for (let i = 0; i < open.length; i++) if (open[i].matches(':modal')) c.modal = open[i];
      } catch (e) { /* :modal unsupported */ }
      if (c.modal) {
        c.anc = new Set();
        for (let p = flatParent(c.modal); p; p = flatParent(p)) c.anc.add(p);
      }
      docCtxCache.set(doc, c);
      return c;
    }
    const NO_MODAL = { modal: null, anc: null };

    // Whether the snapshot would omit `el` (checks its flat-tree ancestors, and the frames
    // above it as far as they are reachable).
    function isHiddenFull(el) {
      const s = st(el);
      if (s.v !== 'visible') return true;
      if (s.d !== 'contents' && el.checkVisibility && !el.checkVisibility()) return true;
      let n = el;
      for (;;) {
        for (let p = n; p; p = flatParent(p)) {
          const ps = st(p);
          if (ps.d === 'none' || p.getAttribute('aria-hidden') === 'true' || p.inert === true) return true;
        }
        const c = docCtx(n.ownerDocument);
        if (c.modal && n !== c.modal && !c.anc.has(n) && !flatContains(c.modal, n)) return true;
        let fe = null;
        try {
          const view = n.ownerDocument.defaultView;
          fe = view && view !== G && n.ownerDocument !== document ? view.frameElement : null;
        } catch (e) { fe = null; }
        if (!fe) return false;
        n = fe;
      }
    }

    function flatContains(anc, n) {
      for (let p = n; p; p = flatParent(p)) if (p === anc) return true;
      return false;
    }

    // ---------------------------------------------------------------- roles
    function isFocusable(el, tag) {
      if (el.hasAttribute('tabindex')) return true;
      switch (tag) {
        case 'a': case 'area': return el.hasAttribute('href');
        case 'button': case 'select': case 'textarea': return !el.disabled;
        case 'input': return el.type !== 'hidden' && !el.disabled;
        case 'iframe': case 'summary': return true;
      }
      return el.hasAttribute('contenteditable') && el.isContentEditable;
    }

    function roleOf(el) {
      let r = roleCache.get(el);
      if (r === undefined) {
        r = computeRole(el) || '';
        roleCache.set(el, r);
      }
      return r;
    }

    function computeRole(el) {
      const tag = el.localName;
      const explicit = el.getAttribute('role');
      if (explicit) {
        const toks = explicit.trim().toLowerCase().split(/\s+/);
        for (let i = 0; i < toks.length; i++) {
          let tok = toks[i];
          if (tok === 'image') tok = 'img';
          if (!ARIA_ROLES.has(tok)) continue;
          if (tok === 'none' || tok === 'presentation') {
            if (isFocusable(el, tag) || el.hasAttribute('aria-label') || el.hasAttribute('aria-labelledby') ||
                el.hasAttribute('aria-describedby')) break;
            return 'none';
          }
          if (tok === 'option' && tag !== 'option') {
            const p = el.parentElement;
            if (!p || !p.closest(OPTION_CONTEXT)) return 'generic';
          } else if (tok === 'treeitem') {
            const p = el.parentElement;
            if (!p || !p.closest('[role~="tree"],[role~="group"],[role~="treegrid"]')) return 'generic';
          }
          return tok;
        }
      }
      return implicitRole(el, tag);
    }

    function presentationalParent(el) {
      const p = el.parentElement;
      return !!p && roleOf(p) === 'none';
    }

    function tableRole(el) {
      const t = el.closest('table');
      if (!t) return '';
      let r = tableRoleCache.get(t);
      if (r === undefined) {
        r = roleOf(t);
        tableRoleCache.set(t, r);
      }
      return r;
    }

    function implicitRole(el, tag) {
      switch (tag) {
        case 'a': case 'area': return el.hasAttribute('href') ? 'link' : null;
        case 'article': return 'article';
        case 'aside':
          if (el.parentElement && el.parentElement.closest('article,aside,nav,section')) {
            return nameOf(el, 'complementary').name ? 'complementary' : null;
          }
          return 'complementary';
        case 'blockquote': return 'blockquote';
        case 'button': return 'button';
        case 'caption': case 'figcaption': return 'caption';
        case 'dd': return 'definition';
        case 'dt': case 'dfn': return 'term';
        case 'dl': return 'list';
        case 'details': return 'group';
        case 'dialog': return 'dialog';
        case 'fieldset': case 'optgroup': return 'group';
        case 'figure': return 'figure';
        case 'form': return 'form';
        case 'search': return 'search';
        case 'h1': case 'h2': case 'h3': case 'h4': case 'h5': case 'h6': return 'heading';
        case 'header': case 'footer': {
          const p = el.parentElement;
          if (p && p.closest(SECTIONING)) return null;
          return tag === 'header' ? 'banner' : 'contentinfo';
        }
        case 'hr': return 'separator';
        case 'iframe': return 'iframe';
        case 'img': {
          if (el.getAttribute('alt') === '' && !el.getAttribute('title') && !el.hasAttribute('aria-label') &&
              !el.hasAttribute('aria-labelledby') && !el.hasAttribute('tabindex')) return 'none';
          return 'img';
        }
        case 'svg': return nameOf(el, 'img').name ? 'img' : null;
        case 'input': {
          const type = el.type;
          if (TEXT_INPUTS.has(type)) {
            if (el.hasAttribute('list') && el.list) return 'combobox';
            return type === 'search' ? 'searchbox' : 'textbox';
          }
          switch (type) {
            case 'hidden': return null;
            case 'checkbox': return 'checkbox';
            case 'radio': return 'radio';
            case 'number': return 'spinbutton';
            case 'range': return 'slider';
            case 'button': case 'submit': case 'reset': case 'image': case 'file': return 'button';
            default: return 'textbox'; // password, date, time, datetime-local, month, week, color
          }
        }
        case 'li': return presentationalParent(el) ? 'none' : 'listitem';
        case 'main': return 'main';
        case 'math': return 'math';
        case 'menu': case 'ol': case 'ul': return 'list';
        case 'meter': return 'meter';
        case 'nav': return 'navigation';
        case 'option': return 'option';
        case 'output': return 'status';
        case 'p': return 'paragraph';
        case 'progress': return 'progressbar';
        case 'section': return nameOf(el, 'region').name ? 'region' : null;
        case 'select': return el.multiple || el.size > 1 ? 'listbox' : 'combobox';
        case 'summary': {
          const p = el.parentElement;
          if (p && p.localName === 'details') {
            for (let c = p.firstElementChild; c; c = c.nextElementSibling) {
              if (c.localName === 'summary') return c === el ? 'button' : null;
            }
          }
          return null;
        }
        case 'table': return 'table';
        case 'thead': case 'tbody': case 'tfoot': {
          const tr = tableRole(el);
          return tr === 'none' ? 'none' : 'rowgroup';
        }
        case 'tr': {
          const tr = tableRole(el);
          return tr === 'none' ? 'none' : 'row';
        }
        case 'td': {
          const tr = tableRole(el);
          if (tr === 'none') return 'none';
          return tr === 'grid' || tr === 'treegrid' ? 'gridcell' : 'cell';
        }
        case 'th': {
          const tr = tableRole(el);
          if (tr === 'none') return 'none';
          const scope = (el.getAttribute('scope') || '').toLowerCase();
          if (scope === 'row' || scope === 'rowgroup') return 'rowheader';
          if (scope === 'col' || scope === 'colgroup') return 'columnheader';
          const row = el.parentElement;
          if (row && row.parentElement && row.parentElement.localName === 'thead') return 'columnheader';
          for (let c = row ? row.firstElementChild : null; c; c = c.nextElementSibling) {
            if (c.localName === 'td') return 'rowheader';
          }
          return 'columnheader';
        }
        case 'textarea': return 'textbox';
      }
      if (el.hasAttribute('contenteditable') && el.isContentEditable) {
        const p = el.parentElement;
        if (!p || !p.isContentEditable) return 'textbox';
      }
      return null;
    }

    // ---------------------------------------------------------------- names
    function nameOf(el, role) {
      let n = nameCache.get(el);
      if (n === undefined) {
        n = computeName(el, role);
        nameCache.set(el, n);
      }
      return n;
    }

    function idRefs(el, attr) {
      const ids = attr.trim().split(/[ \t\n\r\f]+/);
      const root = el.getRootNode();
      const out = [];
      for (let i = 0; i < ids.length; i++) {
        if (!ids[i]) continue;
        const r = root.getElementById ? root.getElementById(ids[i]) : el.ownerDocument.getElementById(ids[i]);
        if (r) out.push(r);
      }
      return out;
    }

    function labelledbyText(el) {
      const refs = idRefs(el, el.getAttribute('aria-labelledby') || '');
      if (!refs.length) return '';
      const parts = [];
      for (let i = 0; i < refs.length; i++) {
        const r = refs[i];
        const c = { exclude: null, lb: true, all: isHiddenFull(r) };
        const t = elemText(r, c, true);
        if (t) parts.push(t);
      }
      return collapse(parts.join(' '));
    }

    // <label>s of a control. Not `el.labels`: Chrome builds that list by walking the whole
    // document the first time it is read for each control (1.4 s for 2,000 inputs); one pass
    // over the labels of the tree scope gives the same lists in the same (tree) order.
    function labelsOf(el) {
      const root = el.getRootNode();
      let m = labelMaps.get(root);
      if (m === undefined) {
        m = new Map();
        const all = root.querySelectorAll ? root.querySelectorAll('label') : [];
        for (let i = 0; i < all.length; i++) {
          const c = all[i].control;
          if (!c) continue;
          const list = m.get(c);
          if (list) list.push(all[i]);
          else m.set(c, [all[i]]);
        }
        labelMaps.set(root, m);
      }
      return m.get(el);
    }

    function labelsText(el) {
      const labels = labelsOf(el);
      if (!labels) return '';
      const parts = [];
      for (let i = 0; i < labels.length; i++) {
        const lab = labels[i];
        if (isHiddenFull(lab)) continue;
        const t = elemText(lab, { exclude: el, lb: false, all: false }, true);
        if (t) parts.push(t);
      }
      return collapse(parts.join(' '));
    }

    function selectedText(sel) {
      const opts = sel.selectedOptions;
      const parts = [];
      for (let i = 0; i < opts.length; i++) parts.push(opts[i].label);
      return parts.join(' ');
    }

    function svgTitle(el) {
      for (let c = el.firstElementChild; c; c = c.nextElementSibling) {
        if (c.localName === 'title') return collapse(c.textContent || '');
      }
      return '';
    }

    // Value of an embedded control inside a label/content, or null if `el` is not one.
    function embeddedValue(el, tag, role) {
      switch (role) {
        case 'textbox': case 'searchbox':
          if (tag === 'input' || tag === 'textarea') return el.value;
          return null;
        case 'combobox': case 'listbox':
          if (tag === 'select') return selectedText(el);
          if (tag === 'input') return el.value;
          return null;
        case 'slider': case 'spinbutton': case 'progressbar': case 'scrollbar': case 'meter': {
          const vt = el.getAttribute('aria-valuetext');
          if (vt) return vt;
          const vn = el.getAttribute('aria-valuenow');
          if (vn) return vn;
          if (tag === 'input' || tag === 'progress' || tag === 'meter') return String(el.value);
          return '';
        }
      }
      return null;
    }

    // Name from native attributes while recursing (content of a label, a link, ...).
    function nativeText(el, tag) {
      switch (tag) {
        case 'img': case 'area': {
          const a = el.getAttribute('alt');
          return a !== null ? a : (el.getAttribute('title') || '');
        }
        case 'svg': return svgTitle(el);
        case 'input': {
          const type = el.type;
          if (type === 'image') return el.getAttribute('alt') || el.getAttribute('value') || 'Submit';
          if (type === 'submit') return el.hasAttribute('value') ? el.value : 'Submit';
          if (type === 'reset') return el.hasAttribute('value') ? el.value : 'Reset';
          if (type === 'button') return el.value;
          return '';
        }
      }
      return null;
    }

    // Text contributed by the flat-tree children of `el`.
    // c = {exclude: element to skip (the labelled control), lb: inside aria-labelledby,
    //      all: include hidden content (a hidden element referenced by aria-labelledby)}
    function subtreeText(el, c) {
      let acc = '';
      const list = kids(el);
      let textVis = c.all ? 1 : st(el).v === 'visible' ? 2 : 0; // 2: ask textShown() on first text
      for (let i = 0; i < list.length; i++) {
        const ch = list[i];
        const t = ch.nodeType;
        if (t === 3) {
          if (textVis === 2) textVis = textShown(el) ? 1 : 0;
          if (textVis) acc += transformText(ch.data, el);
        } else if (t === 1) {
          const r = elemText(ch, c, false);
          if (r) acc += r;
        }
      }
      return acc;
    }

    function elemText(el, c, isRoot) {
      if (el === c.exclude) return '';
      const tag = el.localName;
      if (SKIP_TAGS.has(tag)) return '';
      if (tag === 'br') return ' ';
      const s = st(el);
      if (!c.all && !isRoot && hiddenSelf(el, s)) return '';
      const vis = c.all || s.v === 'visible';
      const sp = s.d !== 'inline' || REPLACED.has(tag);
      if (!c.lb && !isRoot && el.hasAttribute('aria-labelledby')) {
        const t = labelledbyText(el);
        if (t) return ' ' + t + ' ';
      }
      const role = roleOf(el);
      if (vis) {
        const ev = embeddedValue(el, tag, role);
        if (ev !== null) return ' ' + ev + ' ';
        const al = el.getAttribute('aria-label');
        if (al && al.trim()) return ' ' + al + ' ';
        const nat = nativeText(el, tag);
        if (nat !== null) return ' ' + nat + ' ';
        if (tag === 'select' || tag === 'textarea') return ' ';
      }
      if (LEAF_TAGS.has(tag)) return sp ? ' ' : '';
      if (!isRoot && NO_CONTENT_IN_NAME.has(role) && tag !== 'details') {
        return sp || SPACED_NO_CONTENT.has(role) ? ' ' : '';
      }
      const inner = subtreeText(el, c);
      return sp ? ' ' + inner + ' ' : inner;
    }

    function computeName(el, role) {
      const tag = el.localName;
      if (el.hasAttribute('aria-labelledby')) {
        const t = labelledbyText(el);
        if (t) return { name: t, content: false };
      }
      const al = el.getAttribute('aria-label');
      if (al && al.trim()) return { name: collapse(al), content: false };
      let nat = '';
      switch (tag) {
        case 'input': {
          const type = el.type;
          if (type === 'submit' || type === 'reset' || type === 'button') {
            if (el.hasAttribute('value')) nat = el.value;
            else nat = type === 'submit' ? 'Submit' : type === 'reset' ? 'Reset' : '';
          } else if (type === 'image') {
            nat = el.getAttribute('alt') || el.getAttribute('value') || el.getAttribute('title') || 'Submit';
          } else if (type === 'file') {
            nat = labelsText(el) || (el.multiple ? 'Choose Files' : 'Choose File');
          } else if (type !== 'hidden') {
            nat = labelsText(el);
          }
          break;
        }
        case 'button': case 'select': case 'textarea': case 'meter': case 'progress': case 'output':
          nat = labelsText(el);
          break;
        case 'fieldset':
          for (let ch = el.firstElementChild; ch; ch = ch.nextElementSibling) {
            if (ch.localName === 'legend') {
              nat = collapse(elemText(ch, { exclude: null, lb: false, all: false }, true));
              break;
            }
          }
          break;
        case 'table':
          for (let ch = el.firstElementChild; ch; ch = ch.nextElementSibling) {
            if (ch.localName === 'caption') {
              nat = collapse(elemText(ch, { exclude: null, lb: false, all: false }, true));
              break;
            }
          }
          break;
        case 'img': case 'area':
          nat = el.getAttribute('alt') || '';
          break;
        case 'svg':
          nat = svgTitle(el);
          break;
        case 'optgroup':
          nat = el.getAttribute('label') || '';
          break;
        case 'option':
          nat = el.label;
          break;
        case 'iframe':
          nat = el.getAttribute('title') || '';
          break;
      }
      nat = collapse(nat);
      if (nat) return { name: nat, content: false };
      if (NAME_FROM_CONTENT.has(role)) {
        const t = collapse(subtreeText(el, { exclude: null, lb: false, all: false }));
        if (t) return { name: t, content: true };
      }
      const title = el.getAttribute('title');
      if (title && title.trim()) return { name: collapse(title), content: false };
      if (tag === 'input' || tag === 'textarea') {
        const ph = el.getAttribute('placeholder');
        if (ph && ph.trim()) return { name: collapse(ph), content: false };
      }
      const aph = el.getAttribute('aria-placeholder');
      if (aph && aph.trim()) return { name: collapse(aph), content: false };
      return { name: '', content: false };
    }

    // ---------------------------------------------------------------- attributes and values
    // Disabled natively (`:disabled`: a form control, or one in a disabled fieldset) or by
    // `aria-disabled` on it or an ancestor. One function for the snapshot's [disabled] and
    // for actionable(): a second declaration of this name further down once silently
    // replaced this one for both.
    function isDisabled(el) {
      try { if (el.matches(':disabled')) return true; } catch (e) { /* not an element matches() takes */ }
      return !!el.closest('[aria-disabled="true"]');
    }

    function attrsOf(el, tag, role) {
      let a = '';
      if (CHECKABLE.has(role)) {
        if (tag === 'input' && (el.type === 'checkbox' || el.type === 'radio')) {
          if (el.type === 'checkbox' && el.indeterminate) a += ' [checked=mixed]';
          else if (el.checked) a += ' [checked]';
        } else {
          const v = el.getAttribute('aria-checked');
          if (v === 'true') a += ' [checked]';
          else if (v === 'mixed') a += ' [checked=mixed]';
        }
      }
      if ((INTERACTIVE.has(role) || role === 'group' || el.hasAttribute('aria-disabled')) && isDisabled(el)) {
        a += ' [disabled]';
      }
      if (tag === 'summary' && role === 'button') {
        a += el.parentElement.open ? ' [expanded]' : ' [expanded=false]';
      } else {
        const ex = el.getAttribute('aria-expanded');
        if (ex === 'true') a += ' [expanded]';
        else if (ex === 'false') a += ' [expanded=false]';
      }
      if (role === 'heading') {
        let level = parseInt(el.getAttribute('aria-level') || '', 10);
        if (!(level > 0)) level = /^h[1-6]$/.test(tag) ? +tag[1] : 2;
        a += ' [level=' + level + ']';
      }
      if (role === 'button') {
        const p = el.getAttribute('aria-pressed');
        if (p === 'true') a += ' [pressed]';
        else if (p === 'mixed') a += ' [pressed=mixed]';
      }
      if (tag === 'option' && role === 'option') {
        if (el.selected) a += ' [selected]';
      } else if (SELECTABLE.has(role) && el.getAttribute('aria-selected') === 'true') {
        a += ' [selected]';
      }
      if (((tag === 'input' || tag === 'select' || tag === 'textarea') && el.required) ||
          el.getAttribute('aria-required') === 'true') a += ' [required]';
      if (((tag === 'input' || tag === 'textarea') && el.readOnly && READONLY_ROLES.has(role)) ||
          el.getAttribute('aria-readonly') === 'true') a += ' [readonly]';
      return a;
    }

    function valueOf(el, tag, role) {
      let v;
      if (tag === 'input') {
        if (el.type === 'file') return filesOf(el);
        if (!INPUT_VALUE_ROLES.has(role)) return undefined;
        v = el.type === 'password' ? '\u2022'.repeat(el.value.length) : el.value;
      } else if (tag === 'textarea') {
        if (role !== 'textbox' && role !== 'searchbox') return undefined;
        v = el.value;
      } else if (tag === 'select') {
        if (role !== 'combobox') return undefined;
        v = selectedText(el);
      } else if (tag === 'progress' || tag === 'meter') {
        if (role !== 'progressbar' && role !== 'meter') return undefined;
        if (tag === 'progress' && !el.hasAttribute('value')) return undefined; // indeterminate
        v = String(el.value);
      } else if (role === 'slider' || role === 'spinbutton' || role === 'progressbar' || role === 'meter') {
        v = el.getAttribute('aria-valuetext') || el.getAttribute('aria-valuenow') || '';
      } else {
        return undefined;
      }
      v = cut(collapse(v), VALUE_MAX);
      return v || undefined;
    }

    // A file input's chosen files, as the page can read them (names only).
    function filesOf(el) {
      const files = el.files;
      if (!files || !files.length) return 'no file chosen';
      const names = [];
      for (let i = 0; i < files.length; i++) names.push(files[i].name);
      return cut(collapse('files: ' + names.join(', ')), VALUE_MAX);
    }

    // ---------------------------------------------------------------- tree building
    // Items: text {t, open} or element {el, role, name, content, attrs, value, url, kids,
    // frame (0 = none, 1 = entered, 2 = cross-origin), hasRef}.
    function pushText(out, s) {
      const last = out.length ? out[out.length - 1] : null;
      if (last && last.t !== undefined && last.open) { last.t += s; return; }
      if (!/[^ \t\n\r\f]/.test(s)) return;
      out.push({ t: s, open: true });
    }
    function seal(out) {
      const last = out.length ? out[out.length - 1] : null;
      if (last && last.t !== undefined) last.open = false;
    }

    function walk(container, out, ctx, textVis) {
      const list = kids(container);
      let tv = textVis ? 2 : 0; // 2: ask textShown() on the first text node
      for (let i = 0; i < list.length; i++) {
        const n = list[i];
        const t = n.nodeType;
        if (t === 3) {
          if (tv === 2) tv = textShown(container) ? 1 : 0;
          if (tv) pushText(out, transformText(n.data, container));
        } else if (t === 1) {
          visit(n, out, ctx);
        }
      }
    }

    function visit(el, out, ctx) {
      const tag = el.localName;
      if (SKIP_TAGS.has(tag)) return;
      if (tag === 'br') { pushText(out, ' '); return; }
      const s = st(el);
      if (hiddenSelf(el, s)) return;
      if (ctx.modal) {
        if (el === ctx.modal) ctx = NO_MODAL;
        else if (ctx.anc.has(el)) { walk(el, out, ctx, false); return; }
        else return;
      }
      const vis = s.v === 'visible';
      const role = vis ? roleOf(el) : '';
      if (!role || SKIP_ROLES.has(role)) {
        if (LEAF_TAGS.has(tag) || tag === 'select' || tag === 'iframe') return;
        const block = s.d !== 'inline';
        if (block) seal(out);
        walk(el, out, ctx, vis);
        if (block) seal(out);
        return;
      }
      const nm = nameOf(el, role);
      const item = {
        el, role, name: cut(nm.name, NAME_MAX), content: nm.content, attrs: attrsOf(el, tag, role),
        value: valueOf(el, tag, role), url: undefined, kids: [], frame: 0, refd: INTERACTIVE.has(role),
        hasRef: INTERACTIVE.has(role), opts: false,
      };
      if (role === 'link' && (tag === 'a' || tag === 'area') && el.hasAttribute('href')) {
        item.url = el.getAttribute('href');
      }
      out.push(item);
      if (tag === 'iframe') {
        let doc = null;
        try { doc = el.contentDocument; } catch (e) { doc = null; }
        if (doc) {
          item.frame = 1;
          const root = doc.body || doc.documentElement;
          if (root) walk(root, item.kids, docCtx(doc), st(root).v === 'visible');
          finish(item);
        } else {
          item.frame = 2;
        }
        return;
      }
      if (tag === 'select') {
        // A listbox's options are on the page (refs, clicked like any element); a combobox's are
        // in a popup the browser draws, so they are listed without refs (choose with `select`).
        const bound = { shown: 0, more: 0, max: optionsMax };
        listOptions(el, item.kids, role === 'listbox', bound);
        if (bound.more) item.kids.push({ t: '\u2026 ' + bound.more + ' more options', open: false });
        item.opts = item.kids.length > 0;
        finish(item);
        return;
      }
      if (LEAF_TAGS.has(tag) || role === 'img') return;
      walk(el, item.kids, ctx, vis);
      finish(item);
    }

    // The options (and optgroups, as groups) of a <select>: the first `bound.max`, then only the
    // selected ones (the rest are counted in `bound.more`), so that a select of 200 countries
    // costs 25 lines and still shows what is chosen.
    function listOptions(container, out, refd, bound) {
      for (let c = container.firstElementChild; c; c = c.nextElementSibling) {
        const tag = c.localName;
        if (tag !== 'option' && tag !== 'optgroup') continue;
        if (st(c).d === 'none' || c.getAttribute('aria-hidden') === 'true') continue;
        const role = roleOf(c);
        if (!role || SKIP_ROLES.has(role)) continue;
        if (tag === 'option') {
          if (bound.shown >= bound.max && !c.selected) { bound.more++; continue; }
          bound.shown++;
        }
        const ref = refd && INTERACTIVE.has(role);
        const item = {
          el: c, role, name: cut(nameOf(c, role).name, NAME_MAX), content: false,
          attrs: attrsOf(c, tag, role), value: undefined, url: undefined, kids: [], frame: 0, refd: ref,
          hasRef: ref, opts: false,
        };
        if (tag === 'optgroup') {
          listOptions(c, item.kids, refd, bound);
          if (!item.kids.length) continue;
          finish(item);
        }
        out.push(item);
      }
    }

    // Post-process an item's children once they are built.
    function finish(item) {
      let k = item.kids;
      for (let i = 0; i < k.length; i++) {
        const c = k[i];
        if (c.t !== undefined) c.t = collapse(c.t);
        else if (c.hasRef) item.hasRef = true;
      }
      if (PRES_CHILDREN.has(item.role)) {
        k = k.filter((c) => c.t === undefined && c.hasRef);
      } else if (item.content) {
        const elements = k.filter((c) => c.t === undefined);
        // (the lean form shows the text again when the name was cut)
        if (elements.length !== k.length && elements.length) item.withText = k.filter((c) => c.t !== '');
        k = elements;
      } else if (k.length === 1 && k[0].t !== undefined && k[0].t === item.name) {
        k = [];
      }
      item.kids = k.filter((c) => c.t === undefined || c.t !== '');
    }

    function finishTop(items) {
      const holder = { role: '', kids: items, content: false, name: null, hasRef: false, refd: false };
      finish(holder);
      return holder.kids;
    }

    // ---------------------------------------------------------------- compact
    function compactItems(items, parentName) {
      const out = [];
      for (let i = 0; i < items.length; i++) {
        const it = items[i];
        if (it.t !== undefined) { out.push(it); continue; }
        const k = it.kids.length ? compactItems(it.kids, it.name) : it.kids;
        const isRef = it.refd;
        if (!isRef && !it.name && (COMPACT_LIFT.has(it.role) ||
            (it.role === 'paragraph' && !k.some((c) => c.t !== undefined)))) {
          for (let j = 0; j < k.length; j++) out.push(k[j]);
          continue;
        }
        if (!isRef && !it.name && it.value === undefined && !k.length && !it.url && !COMPACT_KEEP.has(it.role)) {
          continue;
        }
        out.push(k === it.kids ? it : Object.assign({}, it, { kids: k }));
      }
      // Text that only repeats the name of its parent or of a neighbour (a label next to its
      // control, a legend in its group).
      return out.filter((it, i) => it.t === undefined || !(
        it.t === parentName ||
        (i > 0 && out[i - 1].t === undefined && out[i - 1].name === it.t) ||
        (i + 1 < out.length && out[i + 1].t === undefined && out[i + 1].name === it.t)));
    }

    // The lean format's last rule: a name is not said twice. A node's only child that says
    // nothing but the node's name (an unnamed paragraph of that text in a cell) goes; a node
    // whose only child is a ref'd element of the same name (a cell holding one link) leaves
    // the name to the child, which an agent acts on.
    function unrepeat(items) {
      const out = [];
      for (let i = 0; i < items.length; i++) {
        let it = items[i];
        if (it.t !== undefined) { out.push(it); continue; }
        let k = it.kids.length ? unrepeat(it.kids) : it.kids;
        if (it.content && it.name && !it.refd && k.length) {
          // A name that came from the content says what the children say: when nothing below
          // is acted on, the name alone; when the name was cut, the children alone (with their
          // text, which the name stood for).
          if (it.name.length <= NAME_MAX) {
            if (!k.some(holdsAction)) k = [];
            else if (!it.withText) it = Object.assign({}, it, { name: '' }); // (all said below)
          } else {
            k = it.withText ? unrepeat(compactItems(it.withText, '')) : k;
            it = Object.assign({}, it, { name: '' });
          }
        } else if (it.name && k.length === 1 && k[0].t === undefined && !it.opts) {
          const c = k[0];
          const plain = !c.refd && c.value === undefined && c.url === undefined && !c.attrs && !c.frame;
          const says = !c.name || c.name === it.name;
          const only = c.kids.length === 0 || (c.kids.length === 1 && c.kids[0].t === it.name);
          if (plain && says && only && (c.name === it.name || c.kids.length === 1)) {
            k = [];
          } else if (c.refd && c.name === it.name && !it.refd) {
            it = Object.assign({}, it, { name: '' });
          }
        }
        // A child that says nothing but this node's name (a table's caption) goes.
        if (it.name && k.length > 1) {
          const name = it.name;
          k = k.filter((c) => c.t !== undefined || c.name || holdsAction(c) || c.attrs ||
            !(c.kids.length === 1 && c.kids[0].t === name));
        }
        out.push(k === it.kids ? it : Object.assign({}, it, { kids: k }));
      }
      return out;
    }

    // Whether an item or its subtree holds something an agent acts on or reads apart from
    // names: a ref, a link's address, a value, a frame. (Not `actionable`: the op of that
    // name is declared in this same scope, and the later declaration would win.)
    function holdsAction(it) {
      if (it.t !== undefined) return false;
      if (it.refd || it.url !== undefined || it.value !== undefined || it.frame || it.opts) return true;
      return it.kids.some(holdsAction);
    }

    // ---------------------------------------------------------------- rendering
    function countNodes(it) {
      let n = 1;
      if (it.kids) for (let i = 0; i < it.kids.length; i++) n += countNodes(it.kids[i]);
      return n;
    }
    function countRefs(it) {
      let n = it.refd ? 1 : 0;
      for (let i = 0; it.kids && i < it.kids.length; i++) if (it.kids[i].t === undefined) n += countRefs(it.kids[i]);
      return n;
    }

    // `byEl`: element -> the ref it already has (a merging snapshot keeps it); new refs are
    // numbered from refStart, skipping numbers this world still holds.
    function makeRenderer(opts, S, byEl) {
      const maxDepth = typeof opts.maxDepth === 'number' && opts.maxDepth >= 0 ? opts.maxDepth : Infinity;
      const limit = typeof opts.limit === 'number' && opts.limit >= 0 ? opts.limit : Infinity;
      let next = typeof opts.refStart === 'number' ? opts.refStart : 1;
      const scope = opts.selector || null;
      const R = {
        lines: [], refs: [], frames: [], frameEls: [], nodes: 0, limitHit: false, depthCut: 0, stop: false,
        next, viewLine: null,
      };
      // A page scrolled down: the first line whose element starts in or below the viewport's
      // top (the engine's first part of a long snapshot is the one in view). Not scrolled:
      // the top is in view, and nothing is measured.
      const scroller = document.scrollingElement;
      let findView = !!(scroller && scroller.scrollTop > 0);
      function noteView(it, idx) {
        if (!findView || !it.el || !it.el.getBoundingClientRect) return;
        // (An element without a box, such as a closed select's option, is nowhere.)
        const box = it.el.getBoundingClientRect();
        if ((box.width || box.height) && box.top >= 0) { R.viewLine = idx; findView = false; }
      }
      const nth = new Map();
      const pad = [''];
      // The lean format (the default): one space a level; the full one: two.
      const lean = !!opts.lean;
      const unit = lean ? ' ' : '  ';
      // The lean form marks a line by its indentation alone, and a ref as `[eN]`; the full
      // one is Playwright's aria snapshot (`- ` bullets, `[ref=eN]`).
      const bullet = lean ? '' : '- ';
      function indent(d) {
        while (pad.length <= d) pad.push(pad[pad.length - 1] + unit);
        return pad[d];
      }
      function room() {
        if (R.nodes >= limit) { R.limitHit = true; R.stop = true; return false; }
        R.nodes++;
        return true;
      }
      // A ref'd node's ref, given (or kept) in output order.
      function refOf(it) {
        const key = it.role + '\u0000' + it.name;
        const n = nth.get(key) || 0;
        nth.set(key, n + 1);
        let ref = byEl ? byEl.get(it.el) : undefined;
        if (ref === undefined) {
          while (S.refs.has('e' + next)) next++;
          ref = 'e' + next++;
        }
        R.refs.push({ ref, role: it.role, name: it.name, nth: n });
        S.refs.set(ref, it.el);
        S.meta.set(ref, { role: it.role, name: it.name, nth: n, scope, optionsMax });
        R.next = next;
        return ref;
      }
      function head(it) {
        let h = bullet + it.role;
        if (it.name) h += ' ' + JSON.stringify(it.name);
        h += it.attrs;
        if (it.refd) {
          const ref = refOf(it);
          h += lean ? ' [' + ref + ']' : ' [ref=' + ref + ']';
        }
        return h;
      }
      // A link that reads inside a sentence as `[name](address) [eN]`: one with a name and an
      // address and nothing else to say (no state, value or content), and nothing in its name
      // or address that would end the brackets early.
      function inlineLink(it) {
        return it.role === 'link' && it.refd && it.url !== undefined && !/\s/.test(it.url)
          && it.name && !/[[\]]/.test(it.name) && !it.attrs && it.value === undefined && !it.kids.length;
      }
      // Prose: text with links between, never two links in a row (a run of links is a list,
      // which reads better a line each).
      function prose(k) {
        let text = false;
        for (let j = 0; j < k.length; j++) {
          if (k[j].t !== undefined) { text = true; continue; }
          if (!inlineLink(k[j]) || (j > 0 && k[j - 1].t === undefined)) return false;
        }
        return text && k.length > 1;
      }
      function full(items, depth) {
        for (let i = 0; i < items.length && !R.stop; i++) {
          const it = items[i];
          if (it.t !== undefined) {
            if (depth > maxDepth) { R.depthCut++; continue; }
            if (!room()) return;
            R.lines.push(indent(depth) + bullet + 'text: ' + it.t);
            continue;
          }
          if (depth > maxDepth) { R.depthCut += countNodes(it); continue; }
          if (!room()) return;
          const h = head(it);
          const k = it.kids;
          const idx = R.lines.length;
          noteView(it, idx);
          line1(it, h, k, depth);
          if (it.frame === 2 && depth + 1 <= maxDepth && !R.stop) {
            R.frames.push({ line: idx, depth: depth + 1 });
            R.frameEls.push(it.el);
          }
        }
      }
      // One node's lines, in either format. Both put a value or a lone text inline. The lean
      // format has the link's address on the node's own line (` -> URL`) and children one level
      // deeper (no ':'); the full one has the address on a nested `- /url:` line, kept even when
      // the children are cut.
      function line1(it, h, k, depth) {
        if (lean && it.url !== undefined) h += ' -> ' + it.url;
        // (a <select> lists its options instead: the selected one is marked)
        if (it.value !== undefined && k.length && !it.opts) k = [{ t: it.value }].concat(k); // rare: ARIA widget with children
        if (it.value !== undefined && (!it.kids.length || (it.opts && depth + 1 > maxDepth))) {
          R.lines.push(indent(depth) + h + ': ' + it.value);
          for (let j = 0; j < it.kids.length && it.opts; j++) R.depthCut += countNodes(it.kids[j]);
        } else if (it.url === undefined && k.length === 1 && k[0].t !== undefined) {
          R.lines.push(indent(depth) + h + ': ' + k[0].t);
        } else if (lean && it.url === undefined && it.value === undefined && depth + 1 <= maxDepth
          && prose(k) && R.nodes + k.length <= limit) {
          // The lean form keeps a sentence on one line, its links in it.
          R.nodes += k.length;
          let line = indent(depth) + h + ':';
          for (const c of k) {
            const word = c.t !== undefined ? c.t : '[' + c.name + '](' + c.url + ') [' + refOf(c) + ']';
            // (punctuation after a link follows it, as on the page)
            line += (/^[.,;:!?)\]}»”’]/.test(word) ? '' : ' ') + word;
          }
          R.lines.push(line);
        } else if (!lean && (it.url !== undefined || (k.length && depth + 1 <= maxDepth))) {
          R.lines.push(indent(depth) + h + ':');
          if (it.url !== undefined) R.lines.push(indent(depth + 1) + '- /url: ' + it.url);
          if (depth + 1 <= maxDepth) full(k, depth + 1);
          else for (let j = 0; j < k.length; j++) R.depthCut += countNodes(k[j]);
        } else {
          R.lines.push(indent(depth) + h);
          if (lean && depth + 1 <= maxDepth) full(k, depth + 1);
          else for (let j = 0; j < k.length; j++) R.depthCut += countNodes(k[j]);
        }
      }
      function interactive(items, sdepth) {
        for (let i = 0; i < items.length && !R.stop; i++) {
          const it = items[i];
          if (it.t !== undefined) continue;
          if (sdepth > maxDepth) { R.depthCut += countRefs(it); continue; }
          if (it.role === 'iframe') {
            if (!room()) return;
            const idx = R.lines.length;
            R.lines.push(head(it));
            if (it.frame === 2) {
              if (sdepth + 1 <= maxDepth) {
                R.frames.push({ line: idx, depth: sdepth + 1 });
                R.frameEls.push(it.el);
              }
            } else {
              interactive(it.kids, sdepth + 1);
            }
            continue;
          }
          if (it.refd) {
            if (!room()) return;
            noteView(it, R.lines.length);
            R.lines.push(head(it) + (it.value !== undefined ? ': ' + it.value : ''));
          }
          if (it.kids.length) interactive(it.kids, sdepth + 1);
        }
      }
      R.full = full;
      R.interactive = interactive;
      return R;
    }

    // Builds the item tree of the document (or of the selector's element).
    function build(scopeEl) {
      const items = [];
      if (scopeEl) {
        if (isHiddenFull(scopeEl)) return items;
        const c = docCtx(scopeEl.ownerDocument);
        const ctx = c.modal && flatContains(c.modal, scopeEl) ? NO_MODAL : c;
        visit(scopeEl, items, ctx);
      } else {
        const root = document.body || document.documentElement;
        if (!root) return items;
        walk(root, items, docCtx(document), st(root).v === 'visible');
      }
      return finishTop(items);
    }

    function newState() {
      const S = { refs: new Map(), meta: new Map(), frames: [] };
      G.__browserRelayState = S;
      return S;
    }

    // ---------------------------------------------------------------- ops
    function snapshot(opts) {
      opts = opts || {};
      const S = G.__browserRelayState || newState();
      if (!S.refs) S.refs = new Map();
      if (!S.meta) S.meta = new Map();
      S.frames = [];
      optionsMax = typeof opts.optionsMax === 'number' ? opts.optionsMax : opts.optionsMax === null ? Infinity
        : OPTIONS_MAX;
      const empty = (error) => ({
        lines: [], refs: [], frames: [], nodes: 0, limitHit: false, depthCut: 0, refNext: opts.refStart || 1, error,
      });
      let scopeEl = null;
      if (opts.selector) {
        try {
          scopeEl = document.querySelector(opts.selector);
        } catch (e) {
          return empty("invalid selector '" + opts.selector + "': " + (e && e.message ? e.message : e));
        }
        if (!scopeEl) return empty("no element matches selector '" + opts.selector + "'");
      }
      // A merging snapshot keeps the refs the engine still has for this frame (`keep`, their
      // numbers) and gives their elements the same refs again; anything else this world held
      // (refs the engine replaced or never recorded) goes. Otherwise every ref goes.
      let byEl = null;
      if (Array.isArray(opts.keep)) {
        const keep = new Set();
        for (let i = 0; i < opts.keep.length; i++) keep.add('e' + opts.keep[i]);
        byEl = new Map();
        for (const [ref, el] of Array.from(S.refs)) {
          if (!keep.has(ref)) { S.refs.delete(ref); S.meta.delete(ref); } else if (el) byEl.set(el, ref);
        }
      } else {
        S.refs.clear();
        S.meta.clear();
      }
      let items = build(scopeEl);
      if (opts.compact || opts.lean) items = compactItems(items);
      if (opts.lean) items = unrepeat(items);
      const R = makeRenderer(opts, S, byEl);
      if (opts.interactive) R.interactive(items, 0);
      else R.full(items, 0);
      S.frames = R.frameEls;
      return {
        lines: R.lines, refs: R.refs, frames: R.frames, nodes: R.nodes, limitHit: R.limitHit, depthCut: R.depthCut,
        viewLine: R.viewLine,
        refNext: R.next,
      };
    }

    // Finds the nth element with exactly `role` and `name` in a fresh walk of the scope the
    // ref's snapshot walked (with as many options per select).
    function findByRoleName(meta, role, name, n) {
      let scopeEl = null;
      if (meta.scope) {
        try { scopeEl = document.querySelector(meta.scope); } catch (e) { scopeEl = null; }
      }
      optionsMax = meta.optionsMax != null ? meta.optionsMax : OPTIONS_MAX;
      const items = build(scopeEl);
      let count = 0;
      let found = null;
      (function visitItems(list) {
        for (let i = 0; i < list.length && !found; i++) {
          const it = list[i];
          if (it.t !== undefined) continue;
          if (it.role === role && it.name === name && it.refd) {
            if (count === n) { found = it.el; return; }
            count++;
          }
          if (it.kids.length) visitItems(it.kids);
        }
      })(items);
      return found;
    }

    function lookup(a) {
      const S = G.__browserRelayState;
      if (!S || !S.refs) return { error: 'stale' };
      a = a || {};
      const el = S.refs.get(a.ref);
      if (el === undefined) return { error: 'unknown' };
      if (el && alive(el)) return { el, fallback: false };
      const meta = S.meta.get(a.ref) || {};
      const role = a.role != null ? a.role : meta.role;
      const name = a.name != null ? a.name : meta.name;
      const n = a.nth != null ? a.nth : (meta.nth || 0);
      if (role == null || name == null) return { error: 'stale' };
      const found = findByRoleName(meta, role, name, n);
      if (!found) return { error: 'stale' };
      S.refs.set(a.ref, found);
      return { el: found, fallback: true };
    }

    // Connected, and its document is still shown in a frame that leads up to this world's
    // document (a removed or navigated iframe leaves its old document "connected").
    function alive(el) {
      if (!el.isConnected) return false;
      for (let doc = el.ownerDocument; doc !== document;) {
        let fe = null;
        try { fe = doc.defaultView && doc.defaultView.frameElement; } catch (e) { fe = null; }
        if (!fe || !fe.isConnected) return false;
        let inner = null;
        try { inner = fe.contentDocument; } catch (e) { inner = null; }
        if (inner !== doc) return false;
        doc = fe.ownerDocument;
      }
      return true;
    }

    function inView(x, y, w, h, view) {
      return x >= 0 && y >= 0 && x + w <= view.innerWidth && y + h <= view.innerHeight;
    }

    // Border box in this world's viewport; `ok` is false when any viewport on the way up does
    // not fully contain it.
    function boxOf(el) {
      const r = el.getBoundingClientRect();
      let x = r.left;
      let y = r.top;
      const w = r.width;
      const h = r.height;
      let doc = el.ownerDocument;
      let ok = !doc.defaultView || inView(x, y, w, h, doc.defaultView);
      while (doc !== document) {
        let fe = null;
        try { fe = doc.defaultView && doc.defaultView.frameElement; } catch (e) { fe = null; }
        if (!fe) break;
        const fr = fe.getBoundingClientRect();
        const fview = fe.ownerDocument.defaultView;
        const cs = fview.getComputedStyle(fe);
        x += fr.left + fe.clientLeft + (parseFloat(cs.paddingLeft) || 0);
        y += fr.top + fe.clientTop + (parseFloat(cs.paddingTop) || 0);
        if (!inView(x, y, w, h, fview)) ok = false;
        doc = fe.ownerDocument;
      }
      return { x, y, width: w, height: h, ok };
    }

    function resolve(a) {
      const found = lookup(a);
      if (found.error) return { error: found.error };
      const el = found.el;
      let b = boxOf(el);
      const hidden = (b.width === 0 && b.height === 0) || st(el).d === 'none';
      if (!hidden && !b.ok) {
        el.scrollIntoView({ block: 'center', inline: 'center', behavior: 'instant' });
        b = boxOf(el);
      }
      const res = { x: b.x, y: b.y, width: b.width, height: b.height, fallback: found.fallback };
      if (hidden) res.hidden = true;
      return res;
    }

    function describe(el) {
      if (!el || el.nodeType !== 1) return { role: 'generic', name: '', hidden: true, unreachable: false };
      const root = el.getRootNode();
      const unreachable = root.nodeType === 11 && !!root.host && root.host.shadowRoot !== root;
      let role = roleOf(el) || 'generic';
      if (role === 'presentation') role = 'none';
      const name = nameOf(el, role).name;
      return { role, name, hidden: isHiddenFull(el), unreachable };
    }

    // ---- Actions: actionability checks, input helpers, the label overlay. ----

    // `<div id="x" class="a b">`, for "covered by" messages.
    function tagOf(el) {
      let out = '<' + el.localName;
      if (el.id) out += ' id="' + el.id + '"';
      const cls = typeof el.className === 'string' ? el.className.trim().split(/\s+/).filter(Boolean) : [];
      if (cls.length) out += ' class="' + cls.slice(0, 3).join(' ') + '"';
      return out + '>';
    }

    // The innermost element at a point, through open shadow roots.
    function deepHit(doc, x, y) {
      let hit = doc.elementFromPoint(x, y);
      while (hit && hit.shadowRoot) {
        const inner = hit.shadowRoot.elementFromPoint(x, y);
        if (!inner || inner === hit) break;
        hit = inner;
      }
      return hit;
    }

    // `node` is `el` or inside it, across shadow boundaries and slots.
    function holds(el, node) {
      for (let n = node; n; n = n.assignedSlot || n.parentNode || (n.host || null)) {
        if (n === el) return true;
      }
      return false;
    }

    // One rendering frame; background tabs do not run rAF, so a timer bounds it.
    function nextFrame() {
      return new Promise(done => { requestAnimationFrame(() => done()); setTimeout(done, 100); });
    }

    // What a careful user checks before acting on an element: it is there, visible, enabled
    // (unless `enabled: false`), scrolled into view, not moving between two frames (unless
    // `stable: false`), and the point at its centre hits it (unless `hitTest: false`).
    // -> {state: "ok", x, y, width, height (the part to act on), fallback}
    //    | {state: "hidden"|"disabled"|"unstable"}
    //    | {state: "covered", by} | {error: "stale"|"unknown"}
    async function actionable(a) {
      const found = lookup(a);
      if (found.error) return { error: found.error };
      const el = found.el;
      const r0 = el.getBoundingClientRect();
      const visible = r0.width > 0 && r0.height > 0 &&
        (!el.checkVisibility || el.checkVisibility({ visibilityProperty: true }));
      if (!visible) return { state: 'hidden' };
      if (a.enabled !== false && isDisabled(el)) return { state: 'disabled' };
      if (!boxOf(el).ok) el.scrollIntoView({ block: 'center', inline: 'center', behavior: 'instant' });
      const b1 = boxOf(el);
      let b2 = b1;
      if (a.stable !== false) {
        // Stable: the same box in this frame and the next.
        await nextFrame();
        b2 = boxOf(el);
        if (b1.x !== b2.x || b1.y !== b2.y || b1.width !== b2.width || b1.height !== b2.height) {
          return { state: 'unstable' };
        }
      }
      // The part to act on: the first line box of an inline element that wraps (the centre
      // of its bounding box may lie between its lines, on something else).
      const whole = el.getBoundingClientRect();
      const part = Array.from(el.getClientRects()).find(r => r.width >= 1 && r.height >= 1) || whole;
      if (a.hitTest !== false) {
        const hit = deepHit(el.ownerDocument, part.left + part.width / 2, part.top + part.height / 2);
        // A <label> of the control receives its clicks too.
        if (hit && !holds(el, hit) && hit.control !== el) return { state: 'covered', by: tagOf(hit) };
      }
      const dx = b2.x - whole.left;
      const dy = b2.y - whole.top;
      const ready = { state: 'ok', x: part.left + dx, y: part.top + dy, width: part.width, height: part.height,
        fallback: found.fallback };
      // `focus: true`: also focus it for typing (saves a round trip per field).
      if (a.focus) ready.focus = focusEl(el);
      return ready;
    }

    // Focuses an element for typing and selects its current content, so that inserted text
    // replaces it. -> {kind: "input"|"textarea"|"contenteditable"|"other", type, focused}
    function focusForTyping(a) {
      const found = lookup(a);
      if (found.error) return { error: found.error };
      return focusEl(found.el);
    }

    function focusEl(el) {
      const doc = el.ownerDocument;
      el.focus();
      if (el.localName === 'input' || el.localName === 'textarea') {
        try { el.select(); } catch (e) { /* types without a text selection */ }
        return { kind: el.localName, type: el.type || '', focused: doc.activeElement === el };
      }
      if (el.isContentEditable) {
        const range = doc.createRange();
        range.selectNodeContents(el);
        const sel = doc.getSelection();
        sel.removeAllRanges();
        sel.addRange(range);
        return { kind: 'contenteditable', type: '', focused: true };
      }
      return { kind: 'other', type: '', focused: doc.activeElement === el };
    }

    function fire(el, names) {
      for (const name of names) el.dispatchEvent(new Event(name, { bubbles: true }));
    }

    // Sets the value of an input that has no text to type into (date, time, color, range…)
    // as a user's picker would, with input and change events.
    function setValue(a) {
      const found = lookup(a);
      if (found.error) return { error: found.error };
      const el = found.el;
      if (el.localName !== 'input') return { error: 'not an input' };
      el.focus();
      const proto = el.ownerDocument.defaultView.HTMLInputElement.prototype;
      Object.getOwnPropertyDescriptor(proto, 'value').set.call(el, String(a.value));
      if (String(a.value) !== '' && el.value === '') return { error: 'the value "' + a.value + '" is not valid for an input of type ' + el.type };
      fire(el, ['input', 'change']);
      return { value: el.value };
    }

    // Selects options of a <select> by value or label, as a user would.
    function selectOptions(a) {
      const found = lookup(a);
      if (found.error) return { error: found.error };
      const el = found.el;
      if (el.localName !== 'select') return { error: 'not a <select>' };
      const options = Array.from(el.options);
      const wanted = a.values || [];
      if (!el.multiple && wanted.length > 1) return { error: 'a single <select> takes one value' };
      const picked = [];
      for (const v of wanted) {
        const o = options.find(o => o.value === v) || options.find(o => o.label.trim() === v || o.text.trim() === v);
        if (!o) return { error: 'no option "' + v + '"', options: options.map(o => o.label.trim() || o.value) };
        if (o.disabled) return { error: 'option "' + v + '" is disabled' };
        picked.push(o);
      }
      el.focus();
      for (const o of options) o.selected = picked.includes(o);
      fire(el, ['input', 'change']);
      return { selected: picked.map(o => o.value) };
    }

    // Checked state of a checkbox, radio or switch (native or ARIA).
    function checkedState(a) {
      const found = lookup(a);
      if (found.error) return { error: found.error };
      const el = found.el;
      if (el.localName === 'input' && (el.type === 'checkbox' || el.type === 'radio')) return { checked: el.checked };
      const aria = el.getAttribute('aria-checked');
      if (aria != null) return { checked: aria === 'true' };
      return { error: 'not a checkbox, radio or switch' };
    }

    // Waits in the page for text to appear or go, or a selector to match a visible element.
    async function waitFor(a) {
      const deadline = Date.now() + (a.timeoutMs || 0);
      const text = () => (document.body ? document.body.innerText : '');
      const met = () => {
        if (a.text != null) return text().includes(a.text);
        if (a.textGone != null) return !text().includes(a.textGone);
        if (a.selector != null) {
          const el = document.querySelector(a.selector);
          return !!el && (!el.checkVisibility || el.checkVisibility({ visibilityProperty: true }));
        }
        return true;
      };
      for (;;) {
        if (met()) return { met: true };
        if (Date.now() >= deadline) return { met: false };
        await new Promise(done => setTimeout(done, 50));
      }
    }

    const LABELS_ATTR = 'data-browser-relay-labels';

    // Orange boxes with their refs over the refs of the last snapshot that are in the
    // viewport (at most `max`). -> {labels, skipped}
    function showLabels(a) {
      hideLabels();
      const S = G.__browserRelayState;
      if (!S || !S.refs) return { labels: 0, skipped: 0 };
      const max = a && a.max ? a.max : 150;
      const host = document.createElement('div');
      host.setAttribute(LABELS_ATTR, '');
      host.style.cssText = 'position:fixed;left:0;top:0;width:0;height:0;pointer-events:none;z-index:2147483647';
      const placed = [];
      let skipped = 0;
      for (const [ref, el] of S.refs) {
        if (!el || !alive(el)) { skipped++; continue; }
        const b = boxOf(el);
        const onScreen = b.width > 0 && b.height > 0 && b.x < innerWidth && b.y < innerHeight &&
          b.x + b.width > 0 && b.y + b.height > 0;
        if (!onScreen || placed.length >= max) { skipped++; continue; }
        const box = document.createElement('div');
        box.style.cssText = 'position:fixed;box-sizing:border-box;border:2px solid #FF4500;' +
          'left:' + b.x + 'px;top:' + b.y + 'px;width:' + b.width + 'px;height:' + b.height + 'px';
        const tag = document.createElement('span');
        tag.textContent = ref;
        tag.style.cssText = 'position:fixed;left:0;top:0;white-space:nowrap;' +
          'background:#FF4500;color:#fff;font:bold 11px/14px monospace;padding:0 3px';
        host.appendChild(box);
        host.appendChild(tag);
        placed.push({ tag, b });
      }
      document.documentElement.appendChild(host);
      // Every label's size in one layout, then every position: a label goes above its box, below
      // it when the box touches the top, inside it when neither fits; never past an edge.
      const root = document.documentElement;
      const vw = Math.min(innerWidth, root.clientWidth || innerWidth);
      const vh = Math.min(innerHeight, root.clientHeight || innerHeight);
      const sizes = placed.map((p) => {
        const r = p.tag.getBoundingClientRect(); // not offsetWidth: rounded, it can be short
        return [Math.ceil(r.width), Math.ceil(r.height)];
      });
      for (let i = 0; i < placed.length; i++) {
        const b = placed[i].b;
        const [w, h] = sizes[i];
        let y = b.y - h;
        if (y < 0) y = b.y + b.height;
        if (y + h > vh) y = Math.min(Math.max(b.y, 0), vh - h);
        const x = Math.min(Math.max(b.x, 0), vw - w);
        placed[i].tag.style.left = Math.max(x, 0) + 'px';
        placed[i].tag.style.top = Math.max(y, 0) + 'px';
      }
      return { labels: placed.length, skipped };
    }

    function hideLabels() {
      for (const node of document.querySelectorAll('[' + LABELS_ATTR + ']')) node.remove();
      return true;
    }

    // ---------------------------------------------------------------- what an action changed
    // The roles whose element an agent would name as the part of the page that changed.
    const PARTS = new Set(['dialog', 'alertdialog', 'alert', 'status', 'banner', 'navigation', 'main',
      'complementary', 'contentinfo', 'form', 'search', 'region', 'table', 'grid', 'list', 'menu',
      'listbox', 'tablist', 'tabpanel', 'tree', 'article']);
    // Changes a page makes to itself all the time (a caret, an animation) would name parts
    // nobody touched: only these attributes count.
    const SHOWING = ['hidden', 'open', 'style', 'class', 'aria-expanded', 'aria-hidden', 'aria-selected',
      'aria-checked', 'aria-pressed', 'aria-disabled', 'aria-invalid', 'aria-busy', 'disabled'];
    const NOTED_MAX = 2000;

    function watchChanges() {
      const old = G.__browserRelayWatch;
      if (old) old.observer.disconnect();
      const W = { changed: [], added: new Set() };
      W.observer = new MutationObserver((records) => noteChanges(W, records));
      W.observer.observe(document, {
        subtree: true, childList: true, characterData: true, attributes: true, attributeFilter: SHOWING,
      });
      G.__browserRelayWatch = W;
      return true;
    }

    function noteChanges(W, records) {
      for (let i = 0; i < records.length && W.changed.length < NOTED_MAX; i++) {
        const r = records[i];
        const at = r.target.nodeType === 1 ? r.target : r.target.parentElement;
        if (at) W.changed.push(at);
        for (let j = 0; j < r.addedNodes.length; j++) {
          const n = r.addedNodes[j];
          if (n.nodeType === 1) { W.added.add(n); W.changed.push(n); }
        }
      }
      // Enough to name three parts; an action that never asks (it failed) holds no more.
      if (W.changed.length >= NOTED_MAX) W.observer.disconnect();
    }

    // The nearest part holding `el` (its own element when it is one), or null for the page.
    function partOf(el) {
      for (let n = el; n && n.nodeType === 1; n = flatParent(n)) {
        if (n === document.body || n === document.documentElement) return null;
        if (PARTS.has(roleOf(n)) && !isHiddenFull(n)) return n;
      }
      return null;
    }

    function partName(el) {
      const role = roleOf(el);
      const name = cut(nameOf(el, role).name, 40);
      return name ? role + ' "' + name + '"' : role;
    }

    function changedParts(a) {
      const W = G.__browserRelayWatch;
      G.__browserRelayWatch = undefined;
      if (!W) return { parts: [], more: 0 };
      noteChanges(W, W.observer.takeRecords());
      W.observer.disconnect();
      const parts = new Set();
      const gone = new Set();
      let page = false;
      for (let i = 0; i < W.changed.length; i++) {
        let el = W.changed[i];
        // (A node taken out was noted as a change of the node it left.)
        if (!el.isConnected) continue;
        if (isHiddenFull(el)) {
          // Hidden now: a part that closed, in whatever part still shows.
          if (PARTS.has(roleOf(el)) && !W.added.has(el)) gone.add(el);
          el = flatParent(el);
          if (!el) continue;
        }
        const part = partOf(el);
        if (part) parts.add(part); else page = true;
      }
      // The inner parts say where: a part that holds another is left to it.
      const shown = Array.from(parts);
      const inner = shown.filter((p) => !shown.some((q) => q !== p && p.contains(q)));
      const list = inner.concat(Array.from(gone));
      list.sort((x, y) => (x.compareDocumentPosition(y) & Node.DOCUMENT_POSITION_FOLLOWING ? -1 : 1));
      const isNew = (p) => { for (let n = p; n; n = n.parentElement) if (W.added.has(n)) return true; return false; };
      const named = list.map((p) => partName(p) + (gone.has(p) ? ' (gone)' : isNew(p) ? ' (new)' : ''));
      if (page && !named.length) named.push('the page');
      const max = (a && a.max) || 3;
      return { parts: named.slice(0, max), more: Math.max(0, named.length - max) };
    }

    return function run(op, arg) {
      styleCache = new Map();
      roleCache = new Map();
      nameCache = new Map();
      tableRoleCache = new Map();
      docCtxCache = new Map();
      labelMaps = new Map();
      switch (op) {
        case 'snapshot': return snapshot(arg);
        case 'resolve': return resolve(arg);
        case 'element': {
          const found = lookup(arg);
          if (found.error) throw new Error(found.error);
          return found.el;
        }
        case 'frameElement': {
          const S = G.__browserRelayState;
          return (S && S.frames && S.frames[arg]) || null;
        }
        case 'describe': return describe(arg);
        case 'watchChanges': return watchChanges();
        case 'changedParts': return changedParts(arg);
        case 'actionable': return actionable(arg);
        case 'focusForTyping': return focusForTyping(arg);
        case 'setValue': return setValue(arg);
        case 'selectOptions': return selectOptions(arg);
        case 'checkedState': return checkedState(arg);
        case 'waitFor': return waitFor(arg);
        case 'showLabels': return showLabels(arg);
        case 'hideLabels': return hideLabels();
        case 'querySelector': return document.querySelector(arg);
        case 'selectorBox': {
          let el;
          try {
            el = document.querySelector(arg);
          } catch (e) {
            return { error: e && e.message ? e.message : String(e) };
          }
          if (!el) return null;
          let b = boxOf(el);
          if (!b.ok && (b.width > 0 || b.height > 0)) {
            el.scrollIntoView({ block: 'center', inline: 'center', behavior: 'instant' });
            b = boxOf(el);
          }
          return { x: b.x, y: b.y, width: b.width, height: b.height };
        }
      }
      throw new Error('unknown op ' + op);
    };
  }
}
