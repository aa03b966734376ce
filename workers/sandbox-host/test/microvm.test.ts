// The conformance suite on the real microVM backends: TCG always (where QEMU exists), KVM only
// where the probe would pick it (VT-x/AMD-V visible and /dev/kvm usable).
import { describeBackendConformance } from "./backend-conformance.ts";
import { kvmBackend, kvmMissing, qemuMissing, tcgBackend } from "./support.ts";

describeBackendConformance("microvm-tcg", () => tcgBackend(), { vm: true }, qemuMissing);
describeBackendConformance("microvm-kvm", () => kvmBackend(), { vm: true }, kvmMissing);
