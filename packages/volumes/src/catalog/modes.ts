// CSI access and attachment modes as jobspecs and volume specs spell them
// (Nomad's names). They are core's vocabulary (the jobspec reader checks
// specs by them too); re-exported here, where the catalog's users name them.
export { ACCESS_MODES, ATTACHMENT_MODES, READER_ONLY_ACCESS_MODES, type AccessMode, type AttachmentMode } from '@csiplug/core';
