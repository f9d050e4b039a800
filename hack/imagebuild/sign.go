package main

// Signatures in the format of `cosign sign-blob --key`: the signature file holds the standard base64
// of an ASN.1 DER ECDSA signature over the SHA-256 of the blob, and the public key is a PEM
// "PUBLIC KEY" (PKIX), so `cosign verify-blob --key cosign.pub --signature x.sig x` verifies what
// this file signs. The Go standard library does it all: cosign itself would bring a large dependency
// tree (and its keyless mode needs a network this project's machines do not have). cosign's own
// encrypted key file ("ENCRYPTED SIGSTORE PRIVATE KEY") is not read; docs/RELEASE.md says how to make
// a key with openssl.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// LoadPrivateKey reads an unencrypted ECDSA P-256 private key, PEM PKCS#8 ("PRIVATE KEY", what
// `openssl genpkey` writes) or SEC1 ("EC PRIVATE KEY", what `openssl ecparam -genkey` writes).
func LoadPrivateKey(path string) (*ecdsa.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM block", path)
	}
	var key any
	switch {
	case strings.Contains(block.Type, "ENCRYPTED"):
		return nil, fmt.Errorf("%s: %q is encrypted; only an unencrypted PKCS#8 key is read (openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out key.pem)", path, block.Type)
	case block.Type == "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case block.Type == "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("%s: PEM block %q is not a private key (want \"PRIVATE KEY\")", path, block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ec, ok := key.(*ecdsa.PrivateKey)
	if !ok || ec.Curve != elliptic.P256() {
		return nil, fmt.Errorf("%s: not an ECDSA P-256 key (cosign's blob signatures are P-256/SHA-256)", path)
	}
	return ec, nil
}

// LoadPublicKey reads a PEM "PUBLIC KEY" (PKIX) ECDSA P-256 key, the format of cosign.pub.
func LoadPublicKey(path string) (*ecdsa.PublicKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PUBLIC KEY" {
		return nil, fmt.Errorf("%s: no PEM \"PUBLIC KEY\" block", path)
	}
	key, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ec, ok := key.(*ecdsa.PublicKey)
	if !ok || ec.Curve != elliptic.P256() {
		return nil, fmt.Errorf("%s: not an ECDSA P-256 public key", path)
	}
	return ec, nil
}

// EncodePublicKey is the PEM PKIX form cosign reads with --key.
func EncodePublicKey(pub *ecdsa.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// SignFile writes path+".sig": base64(ASN.1 ECDSA signature of SHA-256(file)).
func SignFile(key *ecdsa.PrivateKey, path string) error {
	digest, err := fileDigest(path)
	if err != nil {
		return err
	}
	sig, err := ecdsa.SignASN1(rand.Reader, key, digest)
	if err != nil {
		return fmt.Errorf("signing %s: %w", path, err)
	}
	return os.WriteFile(path+".sig", []byte(base64.StdEncoding.EncodeToString(sig)), 0o644)
}

// VerifyFile checks path+".sig" against the public key. The error says which of the two is wrong.
func VerifyFile(pub *ecdsa.PublicKey, path string) error {
	raw, err := os.ReadFile(path + ".sig")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return errors.New("signature missing")
		}
		return err
	}
	sig, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil {
		return fmt.Errorf("signature is not base64: %w", err)
	}
	digest, err := fileDigest(path)
	if err != nil {
		return err
	}
	if !ecdsa.VerifyASN1(pub, digest, sig) {
		return errors.New("signature does not verify with the public key (tampered file or another key)")
	}
	return nil
}

func fileDigest(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}

// SignRelease signs SHA256SUMS and every artefact it lists, and writes the public key next to them.
// Each artefact gets a signature of its own so that one file can be checked with cosign alone,
// without SHA256SUMS.
func SignRelease(r Release, keyPath string, log io.Writer) error {
	if keyPath == "" {
		return errors.New("--key is required")
	}
	key, err := LoadPrivateKey(keyPath)
	if err != nil {
		return err
	}
	sums, err := readSums(r.path(SumsFile))
	if err != nil {
		return fmt.Errorf("%s: %w (run imagebuild sums first)", SumsFile, err)
	}
	for _, a := range append([]string{SumsFile}, sortedKeys(sums)...) {
		if err := SignFile(key, r.path(a)); err != nil {
			return fmt.Errorf("%s: %w", a, err)
		}
	}
	pub, err := EncodePublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := os.WriteFile(r.path(PublicKeyFile), pub, 0o644); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(log, "[release] signed %s and %d artefacts; public key %s\n", SumsFile, len(sums), r.path(PublicKeyFile))
	return nil
}
