//! The hooks: `POST /hooks/dialog` (answer the tab's open or next
//! JavaScript dialog) and `POST /hooks/file-chooser` (files for the next
//! file chooser, or set on a file input now). The last arm wins.

use std::time::Duration;

use cdp_client::protocol::dom;
use tokio::time::Instant;

use crate::api::{ArmDialog, ArmFileChooser, DialogArmed, FilesArmed, Handle, Profiled, Selected};
use crate::conn::{DialogHook, FileHook};
use crate::engine::Engine;
use crate::error::ControlError;

/// Hooks stay armed this long at most (and by default).
pub(crate) const HOOK_TIMEOUT: Duration = Duration::from_secs(120);

/// How long an armed hook waits for its event: as asked, at most (and by
/// default) two minutes.
fn hook_lifetime(ms: Option<u64>) -> Duration {
    ms.map_or(HOOK_TIMEOUT, |ms| Duration::from_millis(ms).min(HOOK_TIMEOUT))
}

fn hook_deadline(ms: Option<u64>) -> Instant {
    Instant::now() + hook_lifetime(ms)
}

impl Handle<ArmDialog> for Engine {
    /// Arms the answer to the tab's next dialog; one already open is
    /// answered now.
    async fn handle(&self, request: Selected<ArmDialog>) -> Result<Profiled<DialogArmed>, ControlError> {
        let ArmDialog { accept, prompt_text, timeout_ms } = request.request;
        let (profile, conn, id) = self.tab(&request.tab).await?;
        let hook = DialogHook { accept, prompt_text, until: hook_deadline(timeout_ms) };
        let answered = conn.arm_dialog(&id, hook);
        Ok(Profiled::new(&profile, DialogArmed { ok: true, target_id: id, armed: answered.is_none(), answered }))
    }
}

const UPLOAD_ROOTS: &str = "uploadRoots = [\"/absolute/folder\"]";

fn outside_upload_roots(path: &str) -> ControlError {
    ControlError::NotAllowed { what: format!("uploading '{path}' (only files under uploadRoots)"), key: UPLOAD_ROOTS }
}

impl Engine {
    /// The folders uploads may come from (`uploadRoots`), as written and
    /// resolved; none configured is a refusal that says how to allow some.
    fn upload_roots(&self) -> Result<Vec<std::path::PathBuf>, ControlError> {
        let configured = self.config()?.upload_roots;
        let resolved = configured.iter().filter_map(|root| std::fs::canonicalize(root).ok());
        let roots: Vec<_> = resolved.chain(configured.iter().cloned()).collect();
        if configured.is_empty() {
            return Err(ControlError::NotAllowed { what: "uploading files".into(), key: UPLOAD_ROOTS });
        }
        Ok(roots)
    }
}

impl Handle<ArmFileChooser> for Engine {
    /// With `ref`, sets the files on that file input now; otherwise arms
    /// them for the tab's next file chooser.
    async fn handle(&self, request: Selected<ArmFileChooser>) -> Result<Profiled<FilesArmed>, ControlError> {
        let ArmFileChooser { paths, element_ref, timeout_ms } = request.request;
        if paths.is_empty() {
            return Err(ControlError::BadRequest("paths is empty".into()));
        }
        let roots = self.upload_roots()?;
        let mut files = Vec::new();
        for path in &paths {
            // Judged as written before the disk is asked, so that a refusal
            // says nothing of what exists outside the roots; then again as
            // resolved, so that no link leads out.
            let written = std::path::Path::new(path);
            let lexically_inside = written.is_absolute()
                && !written.components().any(|c| c == std::path::Component::ParentDir)
                && roots.iter().any(|root| written.starts_with(root));
            if !lexically_inside {
                return Err(outside_upload_roots(path));
            }
            let canonical = std::fs::canonicalize(path)
                .map_err(|e| ControlError::BadRequest(format!("cannot use '{path}': {e}")))?;
            if !roots.iter().any(|root| canonical.starts_with(root)) {
                return Err(outside_upload_roots(path));
            }
            std::fs::File::open(&canonical)
                .map_err(|e| ControlError::BadRequest(format!("cannot read '{path}': {e}")))?;
            if !canonical.is_file() {
                return Err(ControlError::BadRequest(format!("'{path}' is not a file")));
            }
            files.push(canonical.display().to_string());
        }
        let page = self.page_target(&request.tab).await?;
        match element_ref {
            Some(element) => {
                let set = async {
                    let target = self.ref_target(&page, &element).await?;
                    let object = crate::act::element_object(&page, &target).await?;
                    let set =
                        dom::SetFileInputFiles { files: files.clone(), object_id: Some(object), ..Default::default() };
                    let set = page.conn.client().send(&set, Some(&target.frame.session)).await;
                    set.map(drop).map_err(|e| ControlError::Action(format!("{}: {e}", target.name)))
                };
                page.unless_dialog(set).await?;
                Ok(Profiled::new(
                    &page.profile,
                    FilesArmed { ok: true, target_id: page.id.clone(), armed: None, set: Some(files) },
                ))
            }
            None => {
                let hook = FileHook { paths: files.clone(), until: hook_deadline(timeout_ms) };
                let armed = page.conn.arm_file_chooser(&page.id, &page.session, hook).await;
                armed.map_err(ControlError::cdp(&page.profile.name))?;
                Ok(Profiled::new(
                    &page.profile,
                    FilesArmed { ok: true, target_id: page.id.clone(), armed: Some(files), set: None },
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hooks_wait_two_minutes_by_default_and_at_most() {
        assert_eq!(hook_lifetime(None), Duration::from_secs(120));
        assert_eq!(hook_lifetime(Some(5_000)), Duration::from_secs(5));
        assert_eq!(hook_lifetime(Some(3_600_000)), Duration::from_secs(120));
    }
}
