package gpusim

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// PCI vendor and class codes written into the simulated tree, as sysfs shows them.
const (
	pciVendorNVIDIA     = "0x10de"
	pciVendorMellanox   = "0x15b3"
	pciVendorBroadcom   = "0x1000"
	pciClass3DGPU       = "0x030200"
	pciClassInfiniBand  = "0x020700"
	pciClassBridge      = "0x060400"
	connectX7PCIDevice  = "0x1021"
	pcieSwitchPCIDevice = "0xc010"
)

// writeSimSysfs writes the PCI tree of machine under dir/sysfs-<model> and returns that
// root. It mirrors the real layout that mapRails reads:
//
//	devices/pciDDDD:BB/<root port>/<upstream>/<downstream>/<endpoint>/{vendor,device,class,numa_node}
//	devices/.../<nic endpoint>/infiniband/mlx5_N/device -> ../../
//	bus/pci/devices/<bdf> -> ../../../devices/.../<bdf>
//	class/infiniband/mlx5_N -> ../../devices/.../<nic endpoint>/infiniband/mlx5_N
//
// Writing is idempotent and removes nothing, so nodes of one model may share dir, even
// concurrently.
func writeSimSysfs(dir, model string, machine simMachine, layout simLayout) (string, error) {
	root, err := filepath.Abs(filepath.Join(dir, "sysfs-"+model))
	if err != nil {
		return "", err
	}
	w := sysfsWriter{root: root}
	for _, sw := range machine.switches {
		for _, g := range sw.gpus {
			w.device(layout.gpuDirs[g], pciVendorNVIDIA, fmt.Sprintf("0x%04x", machine.pciDeviceID>>16), pciClass3DGPU, sw.socket)
		}
		for _, n := range sw.nics {
			nicDir := layout.nicDirs[n]
			w.device(nicDir, pciVendorMellanox, connectX7PCIDevice, pciClassInfiniBand, sw.socket)
			name := fmt.Sprintf("mlx5_%d", n)
			ibDir := filepath.Join("devices", nicDir, "infiniband", name)
			w.mkdir(ibDir)
			w.symlink(filepath.Join(ibDir, "device"), filepath.Join("devices", nicDir))
			w.mkdir(filepath.Join("class", "infiniband"))
			w.symlink(filepath.Join("class", "infiniband", name), ibDir)
		}
	}
	return root, w.err
}

// sysfsWriter writes files and relative symlinks under root, keeping the first error.
type sysfsWriter struct {
	root string
	err  error
}

// device writes an endpoint and the bridges above it, and links each into bus/pci/devices.
func (w *sysfsWriter) device(path, vendor, device, class string, socket int) {
	parts := strings.Split(path, "/")
	for depth := 2; depth <= len(parts); depth++ { // parts[0] is the root complex pciDDDD:BB
		dir := filepath.Join(append([]string{"devices"}, parts[:depth]...)...)
		w.mkdir(dir)
		vendorID, deviceID, classID := pciVendorBroadcom, pcieSwitchPCIDevice, pciClassBridge
		if depth == len(parts) {
			vendorID, deviceID, classID = vendor, device, class
		}
		w.file(filepath.Join(dir, "vendor"), vendorID)
		w.file(filepath.Join(dir, "device"), deviceID)
		w.file(filepath.Join(dir, "class"), classID)
		w.file(filepath.Join(dir, "numa_node"), fmt.Sprint(socket))
		w.mkdir(filepath.Join("bus", "pci", "devices"))
		w.symlink(filepath.Join("bus", "pci", "devices", parts[depth-1]), dir)
	}
}

func (w *sysfsWriter) mkdir(rel string) {
	if w.err == nil {
		w.err = os.MkdirAll(filepath.Join(w.root, rel), 0o755)
	}
}

func (w *sysfsWriter) file(rel, content string) {
	if w.err == nil {
		w.err = os.WriteFile(filepath.Join(w.root, rel), []byte(content+"\n"), 0o644)
	}
}

// symlink makes link (relative to root) point at target (relative to root) with a relative
// path, so the tree can be moved. An existing link to the same target is kept.
func (w *sysfsWriter) symlink(link, target string) {
	if w.err != nil {
		return
	}
	abs := filepath.Join(w.root, link)
	rel, err := filepath.Rel(filepath.Dir(abs), filepath.Join(w.root, target))
	if err != nil {
		w.err = err
		return
	}
	err = os.Symlink(rel, abs)
	if errors.Is(err, os.ErrExist) {
		if existing, readErr := os.Readlink(abs); readErr == nil && existing == rel {
			return
		}
		if err = os.Remove(abs); err == nil {
			err = os.Symlink(rel, abs)
		}
	}
	w.err = err
}
