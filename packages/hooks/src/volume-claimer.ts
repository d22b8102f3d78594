// IVolumeClaimer's contract — how the csi hook learns about a volume and
// claims it for an alloc — is defined in @csiplug/volumes, next to the local
// volume catalog that implements it; re-exported here so that hooks' users
// keep finding it where they did.
export { ClaimError, type ClaimableVolume, type VolumeClaimRequest, type VolumeClaimResult, type VolumeClaimer } from '@csiplug/volumes';
