# Installs Browser Relay from a release, on Windows (x86_64; Windows on Arm
# runs it under its x64 emulation):
#
#   powershell -ExecutionPolicy Bypass -c "irm https://github.com/browser-relay/browser-relay/releases/latest/download/install.ps1 | iex"
#   powershell -ExecutionPolicy Bypass -File install.ps1 [-Prefix DIR] [-BaseUrl URL] [-Version V]
#
# It fetches SHA256SUMS from the release, picks the Windows archive from it
# (browser-relay-<version>-windows-x86_64.zip, as scripts/package.sh names
# it), fetches the archive and checks it against SHA256SUMS: on a mismatch it
# stops and installs nothing. Then it puts browser-relay.exe and extension\
# in DIR (%LOCALAPPDATA%\Programs\browser-relay unless -Prefix says), by a
# rename of the whole folder once it is ready, and adds DIR to your user PATH.
#
#   -BaseUrl URL  a folder holding SHA256SUMS and the archives (what
#                 package.sh writes in dist\); by default the project's
#                 releases page: .../releases/latest/download, or
#                 .../releases/download/v<V> with -Version.
#   -Version V    that version (from the base URL's SHA256SUMS); by default
#                 the newest it lists.
#
# Windows PowerShell 5.1 or PowerShell 7. SHA256SUMS comes from the same
# place as the archive: the check catches a damaged or altered archive, not
# a release page someone else controls. install.sh is the same for Linux and
# macOS.
[CmdletBinding()]
param(
    [string]$Prefix = '',
    [string]$BaseUrl = '',
    [string]$Version = ''
)

$ErrorActionPreference = 'Stop'
# Windows PowerShell 5.1 offers TLS 1.0 first unless told.
[Net.ServicePointManager]::SecurityProtocol = [Net.ServicePointManager]::SecurityProtocol -bor [Net.SecurityProtocolType]::Tls12
# The progress bar makes Invoke-WebRequest many times slower in 5.1.
$ProgressPreference = 'SilentlyContinue'

# The project's releases page. It names the project's GitHub repository
# until the project says otherwise: change it here and in install.sh.
$Releases = 'https://github.com/browser-relay/browser-relay/releases'
$Pattern = '^browser-relay-(?<version>[0-9][^\s]*)-windows-x86_64\.zip$'

# A terminating error, not `exit`: run through `iex`, exit would close the
# person's PowerShell window. Run with -File, it exits 1.
function Fail([string]$Message) {
    throw "install.ps1: $Message"
}

if (-not $Prefix) { $Prefix = Join-Path $env:LOCALAPPDATA 'Programs\browser-relay' }
$Version = $Version.TrimStart('v')
if ($Version -and $Version -notmatch '^[A-Za-z0-9.+-]+$') { Fail "not a version: $Version" }
if (-not $BaseUrl) {
    if ($Version) { $BaseUrl = "$Releases/download/v$Version" } else { $BaseUrl = "$Releases/latest/download" }
}
$BaseUrl = $BaseUrl.TrimEnd('/')

$Work = Join-Path ([IO.Path]::GetTempPath()) ("browser-relay-install-" + [Guid]::NewGuid().ToString('N'))
New-Item -ItemType Directory -Path $Work | Out-Null
$Unpacked = $null
try {
    Write-Host "Fetching $BaseUrl/SHA256SUMS"
    $SumsFile = Join-Path $Work 'SHA256SUMS'
    try { Invoke-WebRequest -UseBasicParsing -Uri "$BaseUrl/SHA256SUMS" -OutFile $SumsFile }
    catch { Fail "cannot fetch $BaseUrl/SHA256SUMS: $($_.Exception.Message)" }

    # Lines of SHA256SUMS: "<hash>  <name>" (or "<hash> *<name>").
    $Candidates = @()
    foreach ($Line in Get-Content -LiteralPath $SumsFile) {
        $Fields = $Line.Trim() -split '\s+', 2
        if ($Fields.Count -ne 2) { continue }
        $Hash = $Fields[0]
        $Name = $Fields[1].TrimStart('*')
        if ($Hash -notmatch '^[0-9a-fA-F]{64}$') { continue }
        $Match = [regex]::Match($Name, $Pattern)
        if (-not $Match.Success) { continue }
        $Candidates += [pscustomobject]@{ Version = $Match.Groups['version'].Value; Hash = $Hash.ToLowerInvariant(); Name = $Name }
    }
    if ($Version) {
        $Chosen = $Candidates | Where-Object { $_.Version -eq $Version } | Select-Object -First 1
        if (-not $Chosen) { Fail "$BaseUrl/SHA256SUMS lists no browser-relay $Version for windows-x86_64" }
    } else {
        # The newest: numeric on each dotted part (a pre-release's suffix
        # sorts by its number part only).
        $Number = { param($v, $i) $p = ($v -split '\.')[$i]; if ($p -match '^\d+') { [int64]$Matches[0] } else { 0 } }
        $Chosen = $Candidates |
            Sort-Object { & $Number $_.Version 0 }, { & $Number $_.Version 1 }, { & $Number $_.Version 2 } |
            Select-Object -Last 1
        if (-not $Chosen) { Fail "$BaseUrl/SHA256SUMS lists no browser-relay for windows-x86_64" }
    }
    $Version = $Chosen.Version
    $Archive = Join-Path $Work $Chosen.Name

    Write-Host "Fetching $BaseUrl/$($Chosen.Name)"
    try { Invoke-WebRequest -UseBasicParsing -Uri "$BaseUrl/$($Chosen.Name)" -OutFile $Archive }
    catch { Fail "cannot fetch $BaseUrl/$($Chosen.Name): $($_.Exception.Message)" }
    $Actual = (Get-FileHash -Algorithm SHA256 -LiteralPath $Archive).Hash.ToLowerInvariant()
    if ($Actual -ne $Chosen.Hash) {
        Fail "$($Chosen.Name) does not match SHA256SUMS (expected $($Chosen.Hash), got $Actual): it was damaged or altered on the way; nothing was installed"
    }
    Write-Host "Checked $($Chosen.Name) against SHA256SUMS (sha256 $Actual)"

    # Unpacked beside the install (a folder moves only within its volume,
    # and the temporary folder may be on another), then renamed in.
    $Parent = Split-Path -Parent $Prefix
    New-Item -ItemType Directory -Force -Path $Parent | Out-Null
    $Unpacked = "$Prefix.unpacking"
    if (Test-Path -LiteralPath $Unpacked) { Remove-Item -Recurse -Force -LiteralPath $Unpacked }
    Expand-Archive -LiteralPath $Archive -DestinationPath $Unpacked
    $Folder = Join-Path $Unpacked "browser-relay-$Version-windows-x86_64"
    if (-not (Test-Path -LiteralPath (Join-Path $Folder 'browser-relay.exe') -PathType Leaf)) {
        Fail "$($Chosen.Name) holds no browser-relay-$Version-windows-x86_64\browser-relay.exe; nothing was installed"
    }
    if (-not (Test-Path -LiteralPath (Join-Path $Folder 'extension\manifest.json') -PathType Leaf)) {
        Fail "$($Chosen.Name) holds no extension\manifest.json; nothing was installed"
    }

    # The new folder beside the old one, then two renames. A running
    # browser-relay.exe cannot be replaced: say so, and leave the old one.
    $New = "$Prefix.new"
    $Old = "$Prefix.old"
    foreach ($Stale in @($New, $Old)) { if (Test-Path -LiteralPath $Stale) { Remove-Item -Recurse -Force -LiteralPath $Stale } }
    Move-Item -LiteralPath $Folder -Destination $New
    if (Test-Path -LiteralPath $Prefix) {
        try { Move-Item -LiteralPath $Prefix -Destination $Old }
        catch {
            Remove-Item -Recurse -Force -LiteralPath $New
            Fail "cannot replace $Prefix (is browser-relay running? stop it first): $($_.Exception.Message)"
        }
    }
    Move-Item -LiteralPath $New -Destination $Prefix
    if (Test-Path -LiteralPath $Old) { Remove-Item -Recurse -Force -LiteralPath $Old -ErrorAction SilentlyContinue }

    # The user's PATH (not the machine's: no administrator needed).
    $UserPath = [Environment]::GetEnvironmentVariable('Path', 'User')
    $Entries = @($UserPath -split ';' | Where-Object { $_ })
    if ($Entries -notcontains $Prefix) {
        [Environment]::SetEnvironmentVariable('Path', (($Entries + $Prefix) -join ';'), 'User')
        $env:Path = "$env:Path;$Prefix"
        $PathNote = "$Prefix was added to your PATH: open a new terminal to use browser-relay there."
    } else {
        $PathNote = ''
    }

    Write-Host ''
    Write-Host "Installed browser-relay $Version for windows-x86_64:"
    Write-Host "  the program:   $(Join-Path $Prefix 'browser-relay.exe')"
    Write-Host "  the extension: $(Join-Path $Prefix 'extension')"
    Write-Host '    (in Chrome: chrome://extensions, switch on Developer mode, "Load unpacked", pick that folder;'
    Write-Host '     after an update, click its reload button there)'
    Write-Host 'Next: browser-relay serve, then browser-relay pair and open the link it prints.'
    if ($PathNote) { Write-Host $PathNote }
}
finally {
    Remove-Item -Recurse -Force -LiteralPath $Work -ErrorAction SilentlyContinue
    if ($Unpacked) { Remove-Item -Recurse -Force -LiteralPath $Unpacked -ErrorAction SilentlyContinue }
}
