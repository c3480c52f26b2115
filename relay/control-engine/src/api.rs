//! What the control API's routes ask of an engine, as one trait: [`Engine`]
//! is the real one (CDP, both drivers); the route tests drive the HTTP
//! surface with a recording fake, without a browser.

use std::future::Future;

use serde_json::Value;

use crate::act::{ActOutcome, Action, Pdf};
use crate::conn::TabInfo;
use crate::engine::{ConsoleReport, Engine, Navigated, ProfileStatus, Screenshot, ScreenshotRequest, WaitUntil};
use crate::error::ControlError;
use crate::snapshot::{SnapshotOptions, SnapshotResult};

type Answer<T> = Result<T, ControlError>;

/// The control API's operations. `profile: None` is the configured default
/// profile; `target_id: None` the profile's current tab (see
/// [`Engine::tab`](super::engine::Engine)).
pub trait ControlApi: Clone + Send + Sync + 'static {
    fn status(&self, only: Option<&str>) -> impl Future<Output = Answer<Vec<ProfileStatus>>> + Send;
    fn profiles(&self) -> Answer<Value>;
    fn start(&self, profile: Option<&str>) -> impl Future<Output = Answer<ProfileStatus>> + Send;
    fn stop(&self, profile: Option<&str>) -> impl Future<Output = Answer<ProfileStatus>> + Send;
    fn tabs(&self, profile: Option<&str>) -> impl Future<Output = Answer<Vec<TabInfo>>> + Send;
    fn open_tab(&self, profile: Option<&str>, url: &str) -> impl Future<Output = Answer<TabInfo>> + Send;
    fn focus_tab(&self, profile: Option<&str>, target_id: &str) -> impl Future<Output = Answer<()>> + Send;
    fn close_tab(&self, profile: Option<&str>, target_id: &str) -> impl Future<Output = Answer<()>> + Send;
    fn navigate(
        &self,
        profile: Option<&str>,
        target_id: Option<&str>,
        url: &str,
        wait_until: WaitUntil,
        timeout_ms: Option<u64>,
    ) -> impl Future<Output = Answer<Navigated>> + Send;
    fn snapshot(
        &self,
        profile: Option<&str>,
        target_id: Option<&str>,
        options: &SnapshotOptions,
    ) -> impl Future<Output = Answer<SnapshotResult>> + Send;
    fn screenshot(&self, request: &ScreenshotRequest) -> impl Future<Output = Answer<Screenshot>> + Send;
    fn console(
        &self,
        profile: Option<&str>,
        target_id: Option<&str>,
        level: Option<&str>,
        limit: Option<usize>,
    ) -> impl Future<Output = Answer<ConsoleReport>> + Send;
    fn act(
        &self,
        profile: Option<&str>,
        target_id: Option<&str>,
        timeout_ms: Option<u64>,
        action: Action,
    ) -> impl Future<Output = Answer<ActOutcome>> + Send;
    fn arm_dialog(
        &self,
        profile: Option<&str>,
        target_id: Option<&str>,
        accept: bool,
        prompt_text: Option<String>,
        timeout_ms: Option<u64>,
    ) -> impl Future<Output = Answer<Value>> + Send;
    fn arm_file_chooser(
        &self,
        profile: Option<&str>,
        target_id: Option<&str>,
        paths: &[String],
        element_ref: Option<&str>,
        timeout_ms: Option<u64>,
    ) -> impl Future<Output = Answer<Value>> + Send;
    fn pdf(&self, profile: Option<&str>, target_id: Option<&str>) -> impl Future<Output = Answer<Pdf>> + Send;
}

impl ControlApi for Engine {
    fn status(&self, only: Option<&str>) -> impl Future<Output = Answer<Vec<ProfileStatus>>> + Send {
        Engine::status(self, only)
    }
    fn profiles(&self) -> Answer<Value> {
        Engine::profiles(self)
    }
    fn start(&self, profile: Option<&str>) -> impl Future<Output = Answer<ProfileStatus>> + Send {
        Engine::start(self, profile)
    }
    fn stop(&self, profile: Option<&str>) -> impl Future<Output = Answer<ProfileStatus>> + Send {
        Engine::stop(self, profile)
    }
    fn tabs(&self, profile: Option<&str>) -> impl Future<Output = Answer<Vec<TabInfo>>> + Send {
        Engine::tabs(self, profile)
    }
    fn open_tab(&self, profile: Option<&str>, url: &str) -> impl Future<Output = Answer<TabInfo>> + Send {
        Engine::open_tab(self, profile, url)
    }
    fn focus_tab(&self, profile: Option<&str>, target_id: &str) -> impl Future<Output = Answer<()>> + Send {
        Engine::focus_tab(self, profile, target_id)
    }
    fn close_tab(&self, profile: Option<&str>, target_id: &str) -> impl Future<Output = Answer<()>> + Send {
        Engine::close_tab(self, profile, target_id)
    }
    fn navigate(
        &self,
        profile: Option<&str>,
        target_id: Option<&str>,
        url: &str,
        wait_until: WaitUntil,
        timeout_ms: Option<u64>,
    ) -> impl Future<Output = Answer<Navigated>> + Send {
        Engine::navigate(self, profile, target_id, url, wait_until, timeout_ms)
    }
    fn snapshot(
        &self,
        profile: Option<&str>,
        target_id: Option<&str>,
        options: &SnapshotOptions,
    ) -> impl Future<Output = Answer<SnapshotResult>> + Send {
        Engine::snapshot(self, profile, target_id, options)
    }
    fn screenshot(&self, request: &ScreenshotRequest) -> impl Future<Output = Answer<Screenshot>> + Send {
        Engine::screenshot(self, request)
    }
    fn console(
        &self,
        profile: Option<&str>,
        target_id: Option<&str>,
        level: Option<&str>,
        limit: Option<usize>,
    ) -> impl Future<Output = Answer<ConsoleReport>> + Send {
        Engine::console(self, profile, target_id, level, limit)
    }
    fn act(
        &self,
        profile: Option<&str>,
        target_id: Option<&str>,
        timeout_ms: Option<u64>,
        action: Action,
    ) -> impl Future<Output = Answer<ActOutcome>> + Send {
        Engine::act(self, profile, target_id, timeout_ms, action)
    }
    fn arm_dialog(
        &self,
        profile: Option<&str>,
        target_id: Option<&str>,
        accept: bool,
        prompt_text: Option<String>,
        timeout_ms: Option<u64>,
    ) -> impl Future<Output = Answer<Value>> + Send {
        Engine::arm_dialog(self, profile, target_id, accept, prompt_text, timeout_ms)
    }
    fn arm_file_chooser(
        &self,
        profile: Option<&str>,
        target_id: Option<&str>,
        paths: &[String],
        element_ref: Option<&str>,
        timeout_ms: Option<u64>,
    ) -> impl Future<Output = Answer<Value>> + Send {
        Engine::arm_file_chooser(self, profile, target_id, paths, element_ref, timeout_ms)
    }
    fn pdf(&self, profile: Option<&str>, target_id: Option<&str>) -> impl Future<Output = Answer<Pdf>> + Send {
        Engine::pdf(self, profile, target_id)
    }
}
