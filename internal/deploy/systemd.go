// Package deploy writes what a host needs to run Nacre on its own: the
// systemd units that start its targets at boot and its mounts after
// them, before the services that use the file system.
//
// Two template units, instantiated by path (systemd-escape --path):
//
//	nacre-target@.service  nacre serve --dir /%I   (a formatted target directory)
//	nacre-mount@.service   nacre mount /%I         (a mount point)
//
// A target unit starts after the network is up and before
// remote-fs-pre.target, so a mount on the same host waits for the host's
// own targets; a mount unit starts before remote-fs.target, so services
// ordered after remote file systems find the file system there. Settings
// that are not paths (the MGS address, TLS credentials, mount options)
// come from /etc/nacre/nacre.env and, per mount, from
// /etc/nacre/mount-INSTANCE.env (NACRE_MOUNT_OPTIONS, passed as -o).
package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Options says where the units point.
type Options struct {
	Bin     string // the nacre binary, an absolute path
	EnvDir  string // where the environment files are (default /etc/nacre)
	UnitDir string // where the units go (default /etc/systemd/system)
}

// TargetUnit and MountUnit are the template units' file names.
const (
	TargetUnit = "nacre-target@.service"
	MountUnit  = "nacre-mount@.service"
)

func (o *Options) fill() error {
	if o.Bin == "" || !filepath.IsAbs(o.Bin) {
		return fmt.Errorf("the nacre binary must be an absolute path (got %q): systemd runs it from no working directory", o.Bin)
	}
	if st, err := os.Stat(o.Bin); err != nil {
		return fmt.Errorf("the nacre binary %s: %w", o.Bin, err)
	} else if st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("the nacre binary %s is not an executable file", o.Bin)
	}
	if o.EnvDir == "" {
		o.EnvDir = "/etc/nacre"
	}
	if o.UnitDir == "" {
		o.UnitDir = "/etc/systemd/system"
	}
	return nil
}

// Units returns the two template units' contents by file name.
func Units(o Options) (map[string]string, error) {
	if err := o.fill(); err != nil {
		return nil, err
	}
	return units(o), nil
}

// units is Units for filled Options.
func units(o Options) map[string]string {
	env := filepath.Join(o.EnvDir, "nacre.env")
	target := fmt.Sprintf(`[Unit]
Description=Nacre target in /%%I
Wants=network-online.target
After=network-online.target local-fs.target
Before=remote-fs-pre.target
Wants=remote-fs-pre.target
RequiresMountsFor=/%%I

[Service]
Type=exec
EnvironmentFile=-%s
ExecStart=%s serve --dir /%%I
Restart=on-failure
RestartSec=2s
# A clean stop hands leadership over and syncs the store (SIGTERM).
KillSignal=SIGTERM
TimeoutStopSec=60s
LimitNOFILE=1048576

[Install]
WantedBy=multi-user.target
`, env, o.Bin)
	mount := fmt.Sprintf(`[Unit]
Description=Nacre mount at /%%I
Wants=network-online.target
After=network-online.target remote-fs-pre.target
Before=remote-fs.target

[Service]
# nacre mount returns once the mount is ready, its daemon in the
# background: units ordered after this one find the file system there.
Type=forking
EnvironmentFile=-%s
EnvironmentFile=-%s
ExecStartPre=/bin/mkdir -p /%%I
ExecStart=%s mount /%%I $NACRE_MOUNT_OPTIONS
ExecStop=%s umount /%%I
Restart=on-failure
RestartSec=5s
TimeoutStartSec=120s

[Install]
WantedBy=remote-fs.target
`, env, filepath.Join(o.EnvDir, "mount-%i.env"), o.Bin, o.Bin)
	return map[string]string{TargetUnit: target, MountUnit: mount}
}

// WriteSystemd writes the units into o.UnitDir and returns their paths.
// Each is written to a temporary file and renamed, so a unit is never
// seen half written.
func WriteSystemd(o Options) ([]string, error) {
	if err := o.fill(); err != nil {
		return nil, err
	}
	st, err := os.Stat(o.UnitDir)
	if err != nil {
		return nil, fmt.Errorf("unit directory %s: %w", o.UnitDir, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("unit directory %s: not a directory", o.UnitDir)
	}
	units := units(o)
	var out []string
	for _, name := range []string{TargetUnit, MountUnit} {
		p := filepath.Join(o.UnitDir, name)
		tmp := p + ".tmp"
		if err := os.WriteFile(tmp, []byte(units[name]), 0o644); err != nil {
			return out, fmt.Errorf("write %s: %w", p, err)
		}
		if err := os.Rename(tmp, p); err != nil {
			os.Remove(tmp)
			return out, fmt.Errorf("write %s: %w", p, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// Instance is the unit name that runs a target directory or mounts at a
// mount point: template's prefix, the path escaped as systemd-escape
// --path does, .service.
func Instance(template, path string) string {
	return strings.TrimSuffix(template, "@.service") + "@" + EscapePath(path) + ".service"
}

// EscapePath escapes an absolute path as systemd-escape --path does:
// slashes become dashes, and bytes other than ASCII letters, digits, ':',
// '_' and '.' (a leading '.' too) become \xNN.
func EscapePath(path string) string {
	p := strings.Trim(filepath.Clean(path), "/")
	if p == "" {
		return "-"
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '/':
			b.WriteByte('-')
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == ':', c == '_', c == '.' && i > 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, `\x%02x`, c)
		}
	}
	return b.String()
}
