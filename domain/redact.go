package domain

import "encoding/json"

// credentialFields are the payload fields that hold a member's password in
// a stored form: the relay's own to check a sign-in against, nobody's to
// read. Older events hold the plain argon2id hash (password_hash), which
// whoever reads it could guess at offline without limit; newer ones hold
// it sealed (password_sealed), which tells nothing without the key but is
// still nobody's to read.
var credentialFields = map[string][]string{
	TypeMemberJoined:          {"password_hash", "password_sealed"},
	TypeMemberPasswordChanged: {"password_hash", "password_sealed"},
}

// ShownPayload is an event's payload as shown to people (the API's events,
// anything printed): data without the fields that hold a password. The
// type still says what happened ("member.password_changed.v1"). Other
// payloads, and one that is not a JSON object, are returned as they are.
// The log itself keeps its bytes: its hash chain covers them.
func ShownPayload(typ string, data []byte) []byte {
	fields, ok := credentialFields[typ]
	if !ok {
		return data
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		// Not a payload this relay wrote: shown as nothing rather than
		// risk showing a hash it holds in some other shape.
		return []byte("{}")
	}
	removed := false
	for _, f := range fields {
		if _, ok := obj[f]; ok {
			delete(obj, f)
			removed = true
		}
	}
	if !removed {
		return data
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return []byte("{}")
	}
	return out
}
