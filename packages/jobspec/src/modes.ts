// CSI access and attachment modes as jobspecs and volume specs spell them
// (Nomad's names). Core's vocabulary, shared with the volume catalog that
// judges claims by them; the readers here take them from there.
export { ACCESS_MODES, ATTACHMENT_MODES, READER_ONLY_ACCESS_MODES, type AccessMode, type AttachmentMode } from '@csiplug/core';
