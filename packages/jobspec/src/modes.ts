// CSI access and attachment modes as jobspecs and volume specs spell them
// (Nomad's names). Defined in @csiplug/volumes with the VolumeSpec that uses
// them; the agent's readers take them from there.
export { ACCESS_MODES, ATTACHMENT_MODES, READER_ONLY_ACCESS_MODES, type AccessMode, type AttachmentMode } from '@csiplug/volumes';
