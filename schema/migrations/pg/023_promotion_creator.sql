-- The person (an IdP's issuer and subject) who created each promotion, when the credential
-- was one's, so separation of duties between its creator and its approvers compares people,
-- not token names (API.md "Identity").
ALTER TABLE promotions ADD COLUMN creator_issuer TEXT;
ALTER TABLE promotions ADD COLUMN creator_subject TEXT;
