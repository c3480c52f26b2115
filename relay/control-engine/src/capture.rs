//! What the page shows: `GET /snapshot`, `POST /screenshot`, `POST /pdf`,
//! `GET /console`, and the boxes of refs (which screenshots and actions
//! use).

use std::time::Duration;

use base64::Engine as _;
use cdp_client::CdpError;
use cdp_client::protocol::page as cdp_page;
use cdp_client::protocol::runtime::Evaluate;
use serde::Serialize;
use serde_json::json;
use settings::{Driver, Profile};

use crate::api::{
    ConsoleReport, Handle, ImageType, Pdf, PrintPdf, Profiled, ReadConsole, Screenshot, Selected, Snapshot,
    TabSelector, TakeScreenshot, TakeSnapshot,
};
use crate::conn::Conn;
use crate::engine::Engine;
use crate::error::ControlError;
use crate::in_page::answer::{Labels, Located};
use crate::in_page::{self, LiveFrame};
use crate::refs::RefsJoin;
use crate::snapshot;
use crate::tabs::PageTarget;

/// Labels drawn at most on a labelled screenshot.
pub(crate) const MAX_LABELS: u32 = 150;

/// How long a capture runs before the engine asks whether the tab is painted.
const PAINT_CHECK: Duration = Duration::from_secs(1);
/// What `document.visibilityState == "hidden"` means for a capture.
const HIDDEN: &str = "another tab is in front of it in its window, or its window is minimized or covered";
/// Chrome's answer while a navigation swaps the tab's page for a new one.
const NOT_ACTIVE: &str = "Not attached to an active page";
/// Tries, and the pause between them, while the page is swapped.
const SWAP_RETRIES: u32 = 5;
const SWAP_PAUSE: Duration = Duration::from_millis(100);

/// Whether the page says it is hidden (a question bounded to a second: a
/// page paused by a dialog answers nothing).
async fn is_hidden(conn: &Conn, session: &str) -> bool {
    let asked = conn.client().start(&Evaluate::value("document.visibilityState"), Some(session));
    matches!(
        tokio::time::timeout(Duration::from_secs(1), asked).await,
        Ok(Ok(state)) if state.result.value.as_ref().and_then(|v| v.as_str()) == Some("hidden")
    )
}

/// A ref's element box in the tab's viewport (CSS pixels), after scrolling
/// it into view.
// Public with the `testing` feature only, the answer of `Engine::ref_box`.
#[cfg_attr(not(feature = "testing"), allow(unreachable_pub))]
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ElementBox {
    pub x: f64,
    pub y: f64,
    pub width: f64,
    pub height: f64,
}

#[cfg_attr(not(feature = "testing"), allow(unreachable_pub))]
impl ElementBox {
    pub fn center(&self) -> (f64, f64) {
        (self.x + self.width / 2.0, self.y + self.height / 2.0)
    }
}

impl Handle<TakeSnapshot> for Engine {
    /// The tab's snapshot: a full one replaces the tab's refs, a partial one
    /// merges into them (see [`crate::refs`]). While a dialog pauses the
    /// page, the dialog (the one thing an agent can act on then), with the
    /// refs left as they were.
    async fn handle(&self, request: Selected<TakeSnapshot>) -> Result<Profiled<Snapshot>, ControlError> {
        let page = match self.page_target(&request.tab).await {
            Err(ControlError::DialogOpen { .. }) => {
                return self.dialog_snapshot(&request.tab, request.request.full).await;
            }
            page => page?,
        };
        let join = refs_join(&request.request);
        match self.snapshot_of(&page, &request.request, join, snapshot::OptionsListed::FirstFew).await {
            Err(ControlError::DialogOpen { .. }) => {
                drop(page);
                self.dialog_snapshot(&request.tab, request.request.full).await
            }
            snapshot => Ok(Profiled::new(&page.profile, snapshot?)),
        }
    }
}

/// Whether a snapshot shows the whole page in the default form (the one
/// an action's diff is told in).
pub(crate) fn whole_in_default_form(request: &TakeSnapshot) -> bool {
    let TakeSnapshot { format, interactive, full, compact: _, depth, limit, max_chars: _, part, selector, frame } =
        request;
    *format == crate::api::Format::Ai
        && !interactive
        && !full
        && depth.is_none()
        && limit.is_none()
        && part.is_none_or(|p| p <= 1)
        && selector.is_none()
        && frame.is_none()
}

/// How a requested snapshot's refs join the tab's: one of a part of the
/// page (a `selector`, a `frame`) merges; one whose `limit` or `depth`
/// cut the page merges too, so that an agent that asked for the first 50
/// nodes still holds the refs it had further down; any other replaces. A
/// cut by the default limit alone is a full snapshot: nothing was asked
/// to be left out.
fn refs_join(request: &TakeSnapshot) -> RefsJoin {
    if request.selector.is_some() || request.frame.is_some() {
        RefsJoin::Merge
    } else if request.limit.is_some() || request.depth.is_some() {
        RefsJoin::MergeIfCut
    } else {
        RefsJoin::Replace
    }
}

impl Engine {
    /// What a snapshot shows while a dialog pauses the page: the dialog, as
    /// a line of the form asked for (`full`: with the `- ` bullet).
    async fn dialog_snapshot(&self, selector: &TabSelector, full: bool) -> Result<Profiled<Snapshot>, ControlError> {
        let (profile, conn, id) = self.tab(selector).await?;
        let Some(dialog) = conn.open_dialog(&id) else {
            return Err(ControlError::Page("a dialog opened and closed during the snapshot: take it again".into()));
        };
        let (url, title) = conn.tab_url(&id).unwrap_or_default();
        let mut line = format!("{}dialog \"{}\" ({})", snapshot::bullet(full), dialog.message, dialog.kind);
        if let Some(default) = &dialog.default_prompt {
            line.push_str(&format!(": prompt default \"{default}\""));
        }
        let snapshot = Snapshot {
            target_id: id,
            url,
            title,
            snapshot: Some(line),
            notes: vec![format!(
                "a {} dialog pauses the page: answer it (accept or dismiss) to see the page and use its refs",
                dialog.kind
            )],
            dialog: Some(dialog),
            ..Snapshot::default()
        };
        Ok(Profiled::new(&profile, snapshot))
    }
}

impl Handle<TakeScreenshot> for Engine {
    /// The viewport, the full page, or one element (`ref` or `selector`);
    /// saved under the media folder.
    async fn handle(&self, request: Selected<TakeScreenshot>) -> Result<Profiled<Screenshot>, ControlError> {
        let page = self.page_target(&request.tab).await?;
        let shot = page.unless_dialog(self.capture(&page, &request.request)).await?;
        Ok(Profiled::new(&page.profile, shot))
    }
}

/// How long the dashboard's live view waits for one frame.
const PEEK_WITHIN: Duration = Duration::from_secs(3);

impl Engine {
    /// A small JPEG of the tab's viewport for the dashboard's live view:
    /// not saved (the media folder is the agents'), never changes the
    /// profile's current tab, and gives up after [`PEEK_WITHIN`] (a tab
    /// that is not painted gives nothing).
    pub async fn peek(&self, profile: &str, target_id: &str) -> Result<Vec<u8>, ControlError> {
        let selector = TabSelector { profile: Some(profile.to_string()), target_id: Some(target_id.to_string()) };
        let page = self.page_target(&selector).await?;
        let capture = cdp_page::CaptureScreenshot { format: "jpeg", quality: Some(50), ..Default::default() };
        let shot = page.conn.client().start(&capture, Some(&page.session));
        let shot = tokio::time::timeout(PEEK_WITHIN, shot)
            .await
            .map_err(|_| ControlError::Page(format!("the tab gave no frame within {PEEK_WITHIN:?}")))?
            .map_err(ControlError::cdp(profile))?;
        base64::engine::general_purpose::STANDARD
            .decode(shot.data)
            .map_err(|e| ControlError::Page(format!("the frame is not base64: {e}")))
    }
}

impl Handle<PrintPdf> for Engine {
    /// The tab printed to PDF, saved under the media folder.
    async fn handle(&self, request: Selected<PrintPdf>) -> Result<Profiled<Pdf>, ControlError> {
        let page = self.page_target(&request.tab).await?;
        let print = page.conn.client().start(&cdp_page::PrintToPdf { print_background: true }, Some(&page.session));
        let printed = page.unless_dialog(async { print.await.map_err(ControlError::pdf(&page.profile.name)) }).await?;
        let data = base64::engine::general_purpose::STANDARD
            .decode(printed.data)
            .map_err(|e| ControlError::Page(format!("the PDF is not base64: {e}")))?;
        let path = self.save_media("page", "pdf", &data)?;
        Ok(Profiled::new(&page.profile, Pdf { target_id: page.id, path, pages: pdf_pages(&data), bytes: data.len() }))
    }
}

impl Handle<ReadConsole> for Engine {
    /// The tab's newest messages at or above `level`, and its page errors.
    async fn handle(&self, request: Selected<ReadConsole>) -> Result<Profiled<ConsoleReport>, ControlError> {
        let ReadConsole { level, limit } = request.request;
        let min = match level.as_deref() {
            None => 0,
            Some(level) => level_rank(level).ok_or_else(|| {
                ControlError::BadRequest(format!("unknown level '{level}': use debug, log, info, warning or error"))
            })?,
        };
        let (profile, conn, id) = self.tab(&request.tab).await?;
        self.session(&conn, &id).await?;
        let (messages, errors) = conn.console(&id).unwrap_or_default();
        let keep = limit.unwrap_or(usize::MAX);
        let messages: Vec<_> = messages.into_iter().filter(|m| level_rank(&m.level).unwrap_or(0) >= min).collect();
        let skip = messages.len().saturating_sub(keep);
        let error_skip = errors.len().saturating_sub(keep);
        Ok(Profiled::new(
            &profile,
            ConsoleReport {
                target_id: id,
                messages: messages.into_iter().skip(skip).collect(),
                page_errors: errors.into_iter().skip(error_skip).collect(),
            },
        ))
    }
}

impl Engine {
    /// A snapshot of the page, its refs recorded: merged into the tab's
    /// table (`merge`), or replacing it.
    pub(crate) async fn snapshot_of(
        &self,
        page: &PageTarget,
        request: &TakeSnapshot,
        join: RefsJoin,
        listed: snapshot::OptionsListed,
    ) -> Result<Snapshot, ControlError> {
        let PageTarget { profile, conn, id, session, .. } = page;
        let base = if join == RefsJoin::Replace { None } else { self.refs().get(&profile.name, id) };
        let take = snapshot::take(conn, id, request, base.as_deref(), listed);
        let (mut result, issued) = page.unless_dialog(take).await?;
        if let Some(issued) = issued {
            let merge_into = base.as_deref().filter(|_| join == RefsJoin::Merge || issued.cut);
            let mut refs = self.refs();
            refs.record(&profile.name, id, merge_into, issued);
            // What an action's diff is told against: the last whole page in
            // the default form (a part of it read since leaves it as it was).
            if whole_in_default_form(request) && !result.truncated {
                refs.remember(&profile.name, id, result.snapshot.as_deref().map(Into::into));
            } else if join == RefsJoin::Replace {
                refs.remember(&profile.name, id, None);
            }
        }
        if let Some((url, title)) = self.location(conn, session).await.or_else(|| conn.tab_url(id)) {
            result.url = url;
            result.title = title;
        }
        result.target_id = id.clone();
        Ok(result)
    }

    /// Resolves a ref of the tab's last snapshot to its element's box in the
    /// tab's viewport, scrolling it into view first. Actions click its centre.
    #[cfg(feature = "testing")]
    pub async fn ref_box(&self, tab: &TabSelector, element_ref: &str) -> Result<ElementBox, ControlError> {
        let page = self.page_target(tab).await?;
        page.unless_dialog(self.ref_box_locked(&page.profile, &page.conn, &page.id, element_ref)).await
    }

    async fn ref_box_locked(
        &self,
        profile: &Profile,
        conn: &Conn,
        tab: &str,
        element_ref: &str,
    ) -> Result<ElementBox, ControlError> {
        let (name, entry) = self.ref_entry(&profile.name, tab, element_ref)?;
        let frame =
            in_page::live_frame(conn, tab, &entry.frame).await.map_err(|_| ControlError::StaleRef(name.clone()))?;
        let arg = json!({"ref": name, "role": entry.role, "name": entry.name, "nth": entry.nth});
        let found: Located = in_page::call_script(conn, &frame, "resolve", arg).await?;
        match found.error.as_deref() {
            Some("unknown") => return Err(ControlError::UnknownRef(name)),
            Some(_) => return Err(ControlError::StaleRef(name)),
            None => {}
        }
        if found.hidden {
            return Err(ControlError::Page(format!("{name} is not visible (it has no box)")));
        }
        let (dx, dy) = in_page::frame_offset(conn, tab, &entry.frame).await?;
        Ok(ElementBox { x: found.x + dx, y: found.y + dy, width: found.width, height: found.height })
    }

    async fn capture(&self, page: &PageTarget, request: &TakeScreenshot) -> Result<Screenshot, ControlError> {
        let PageTarget { profile, conn, id, session, .. } = page;
        let quality = match (request.image_type, request.quality) {
            (ImageType::Png, Some(_)) => {
                return Err(ControlError::BadRequest("quality applies to jpeg screenshots only".into()));
            }
            (_, Some(q)) if q > 100 => return Err(ControlError::BadRequest("quality is 0–100".into())),
            (_, q) => q,
        };
        let element = match (&request.element_ref, &request.selector) {
            (Some(_), Some(_)) => {
                return Err(ControlError::BadRequest("pass ref or selector, not both".into()));
            }
            (Some(r), None) => Some(self.ref_box_locked(profile, conn, id, r).await?),
            (None, Some(selector)) => Some(self.selector_box(conn, id, session, selector).await?),
            (None, None) => None,
        };
        let format = match request.image_type {
            ImageType::Png => "png",
            ImageType::Jpeg => "jpeg",
        };
        let mut capture = cdp_page::CaptureScreenshot { format, quality, ..Default::default() };
        if element.is_some() || request.full_page {
            let metrics = conn
                .client()
                .send(&cdp_page::GetLayoutMetrics {}, Some(session))
                .await
                .map_err(ControlError::cdp(&profile.name))?;
            let clip = match element {
                Some(b) => {
                    if b.width < 1.0 || b.height < 1.0 {
                        return Err(ControlError::Page("the element has no visible box to capture".into()));
                    }
                    let viewport = metrics.css_visual_viewport;
                    let (x, y) = (b.x + viewport.page_x, b.y + viewport.page_y);
                    cdp_page::Viewport { x, y, width: b.width, height: b.height, scale: 1.0 }
                }
                None => {
                    let size = metrics.css_content_size;
                    cdp_page::Viewport { x: 0.0, y: 0.0, width: size.width, height: size.height, scale: 1.0 }
                }
            };
            capture.clip = Some(clip);
            capture.capture_beyond_viewport = true;
        }
        let main = LiveFrame::main(session, id);
        let mut labelled = None;
        if request.labels {
            let refs = self.refs().get(&profile.name, id).map(|t| t.refs.len()).ok_or_else(|| {
                ControlError::BadRequest("labels need refs: take a snapshot of this tab first".into())
            })?;
            let shown: Labels = in_page::call_script(conn, &main, "showLabels", json!({"max": MAX_LABELS})).await?;
            let labels = shown.labels;
            labelled = Some((labels, (refs as u64).saturating_sub(labels)));
        }
        let shot = self.capture_painted(page, &capture).await;
        if labelled.is_some() {
            // Always taken down, also when the capture failed.
            in_page::call_script::<serde_json::Value>(conn, &main, "hideLabels", json!(null)).await?;
        }
        let shot = shot?;
        let data = base64::engine::general_purpose::STANDARD
            .decode(shot.data)
            .map_err(|e| ControlError::Page(format!("the screenshot is not base64: {e}")))?;
        let (width, height) = image_size(&data).unwrap_or((0, 0));
        let path = self.save_media("screenshot", request.image_type.extension(), &data)?;
        Ok(Screenshot {
            target_id: id.clone(),
            path,
            width,
            height,
            bytes: data.len(),
            mime: request.image_type.mime().into(),
            labels: labelled.map(|(labels, _)| labels),
            skipped: labelled.map(|(_, skipped)| skipped),
            data,
        })
    }

    /// The capture, when Chrome paints the tab. Chrome answers a capture
    /// of a tab it does not paint late or never (see relay-engine's
    /// `capture.rs`), so one still unanswered after [`PAINT_CHECK`] has
    /// the page asked whether it is hidden (through the extension the relay
    /// asks, and its refusal is read); a hidden tab fails at once with the
    /// step that shows it. While a navigation swaps the tab's page,
    /// Chrome answers "Not attached to an active page": tried again, a few
    /// times, as the new page comes in.
    async fn capture_painted(
        &self,
        page: &PageTarget,
        capture: &cdp_page::CaptureScreenshot,
    ) -> Result<cdp_page::Data, ControlError> {
        let PageTarget { profile, conn, id, session, .. } = page;
        let not_in_front = |why: &str| ControlError::NotInFront { target_id: id.clone(), why: why.to_string() };
        // Through the extension the relay looks at the tab itself (and says
        // why, below): asking the page too would be the same work twice.
        let relay_looks = profile.driver == Driver::Extension;
        let mut swapping = SWAP_RETRIES;
        loop {
            let shot = conn.client().start(capture, Some(session));
            tokio::pin!(shot);
            let shot = if relay_looks {
                shot.await
            } else {
                tokio::select! {
                    shot = &mut shot => shot,
                    () = tokio::time::sleep(PAINT_CHECK) => {
                        if is_hidden(conn, session).await {
                            return Err(not_in_front(HIDDEN));
                        }
                        shot.await
                    }
                }
            };
            // The relay looked at the tab (relay-engine's `capture.rs`): its reason.
            let relay_says = match (&shot, self.0.relay.as_ref()) {
                (Err(CdpError::Protocol { message, .. }), Some(link)) if relay_looks => {
                    link.extension.not_in_front(message)
                }
                _ => None,
            };
            if let Some(why) = relay_says {
                return Err(not_in_front(&why));
            }
            match shot {
                Err(CdpError::Protocol { message, .. }) if message.contains(NOT_ACTIVE) && swapping > 0 => {
                    swapping -= 1;
                    tokio::time::sleep(SWAP_PAUSE).await;
                }
                shot => return shot.map_err(ControlError::cdp(&profile.name)),
            }
        }
    }

    async fn selector_box(
        &self,
        conn: &Conn,
        tab: &str,
        session: &str,
        selector: &str,
    ) -> Result<ElementBox, ControlError> {
        let frame = LiveFrame::main(session, tab);
        let found: Option<Located> = in_page::call_script(conn, &frame, "selectorBox", json!(selector)).await?;
        let Some(found) = found else {
            return Err(ControlError::NoSuchElement(selector.to_string()));
        };
        if let Some(error) = found.error {
            return Err(ControlError::BadRequest(format!("selector '{selector}': {error}")));
        }
        Ok(ElementBox { x: found.x, y: found.y, width: found.width, height: found.height })
    }
}

fn level_rank(level: &str) -> Option<u8> {
    Some(match level {
        "debug" => 0,
        "log" | "info" => 1,
        "warning" | "warn" => 2,
        "error" => 3,
        _ => return None,
    })
}

/// Width and height of a PNG or JPEG.
pub(crate) fn image_size(data: &[u8]) -> Option<(u32, u32)> {
    if data.starts_with(b"\x89PNG\r\n\x1a\n") && data.len() >= 24 {
        let w = u32::from_be_bytes(data[16..20].try_into().ok()?);
        let h = u32::from_be_bytes(data[20..24].try_into().ok()?);
        return Some((w, h));
    }
    if data.starts_with(&[0xFF, 0xD8]) {
        let mut i = 2;
        while i + 9 < data.len() {
            if data[i] != 0xFF {
                i += 1;
                continue;
            }
            let marker = data[i + 1];
            let length = usize::from(u16::from_be_bytes([data[i + 2], data[i + 3]]));
            // SOF0..SOF15 except DHT (C4), JPG (C8) and DAC (CC).
            if (0xC0..=0xCF).contains(&marker) && ![0xC4, 0xC8, 0xCC].contains(&marker) {
                let h = u32::from(u16::from_be_bytes([data[i + 5], data[i + 6]]));
                let w = u32::from(u16::from_be_bytes([data[i + 7], data[i + 8]]));
                return Some((w, h));
            }
            i += 2 + length;
        }
    }
    None
}

/// Pages of a PDF Chrome printed: its `/Type /Page` objects.
fn pdf_pages(data: &[u8]) -> usize {
    let needle = b"/Type /Page";
    data.windows(needle.len() + 1).filter(|w| &w[..needle.len()] == needle && w[needle.len()] != b's').count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_sizes_from_headers() {
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
        png.extend_from_slice(&800u32.to_be_bytes());
        png.extend_from_slice(&600u32.to_be_bytes());
        assert_eq!(image_size(&png), Some((800, 600)));
        // SOI, an APP0 segment of length 4, then SOF0 with 17×9.
        let jpeg = [
            0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 0x00, 0x00, 0xFF, 0xC0, 0x00, 0x11, 0x08, 0x00, 0x09, 0x00, 0x11, 0x03,
        ];
        assert_eq!(image_size(&jpeg), Some((17, 9)));
        assert_eq!(image_size(b"GIF89a"), None);
    }

    #[test]
    fn console_levels_are_ordered() {
        assert!(level_rank("error") > level_rank("warning"));
        assert!(level_rank("warning") > level_rank("log"));
        assert_eq!(level_rank("info"), level_rank("log"));
        assert_eq!(level_rank("loud"), None);
    }

    #[test]
    fn pdf_pages_are_counted_without_the_pages_tree() {
        let pdf = b"<< /Type /Pages /Count 2 >> << /Type /Page >> << /Type /Page /Parent 1 0 R >>";
        assert_eq!(pdf_pages(pdf), 2);
    }
}
